<?php
// What the PHP drivers share: the driver contract's two ends (cases/clients/README.md).
// Events go to standard output, one JSON line each; commands come from standard input, one
// JSON object a line, and run one at a time. A library with no thread of its own is polled
// between commands (serve's $poll). An `exit` (or the input's end) ends the driver at once.

/** What the library cannot do: reported `failed` with an error starting `unsupported`. */
class Unsupported extends Exception
{
    public function __construct(string $what)
    {
        parent::__construct("unsupported: $what");
    }
}

function emit(string $event, array $fields = []): void
{
    fwrite(STDOUT, json_encode(['event' => $event] + $fields,
                               JSON_INVALID_UTF8_SUBSTITUTE | JSON_UNESCAPED_SLASHES) . "\n");
    fflush(STDOUT);
}

/** A header map as the library keeps it (name => value), as a JSON object. */
function headers(?array $map): object
{
    return (object) ($map ?? []);
}

function b64(?string $data): string
{
    return base64_encode($data ?? '');
}

/** A command's body as a string of octets: `body_b64` decoded, or `body` as UTF-8. */
function body(array $c): string
{
    return array_key_exists('body_b64', $c) ? base64_decode($c['body_b64']) : (string) ($c['body'] ?? '');
}

/** The url's host and port; Unsupported for a scheme but tcp://. */
function endpoint(string $url): array
{
    $parts = parse_url($url);
    if (($parts['scheme'] ?? '') !== 'tcp' || empty($parts['host']) || empty($parts['port'])) {
        throw new Unsupported("url '$url' (tcp:// only)");
    }
    return [$parts['host'], $parts['port']];
}

/** Say `ready`, then run each command line through $run($op, $command), answering `done` or
 * `failed`; $poll() runs whenever no command is waiting (it should return within ~20 ms). */
function serve(string $library, string $version, callable $run, callable $poll): void
{
    emit('ready', ['library' => $library, 'version' => $version]);
    $buffer = '';
    while (true) {
        $read = [STDIN];
        $none = null;
        if (!stream_select($read, $none, $none, 0, 0)) {
            $poll();
            $read = [STDIN];
            if (!stream_select($read, $none, $none, 0, 20000)) {
                continue;
            }
        }
        $chunk = fread(STDIN, 65536);
        if ($chunk === '' || $chunk === false) {
            exit(0);
        }
        $buffer .= $chunk;
        while (($end = strpos($buffer, "\n")) !== false) {
            $line = substr($buffer, 0, $end);
            $buffer = substr($buffer, $end + 1);
            $command = json_decode($line, true);
            if (!is_array($command) || !is_string($command['op'] ?? null)) {
                emit('failed', ['op' => '?', 'error' => 'not a command line']);
                continue;
            }
            $op = $command['op'];
            unset($command['op']);
            if ($op === 'exit') {
                exit(0);
            }
            try {
                $run($op, $command);
                emit('done', ['op' => $op]);
            } catch (Unsupported $e) {
                emit('failed', ['op' => $op, 'error' => $e->getMessage()]);
            } catch (Throwable $e) {
                emit('failed', ['op' => $op, 'error' => get_class($e) . ': ' . $e->getMessage()]);
            }
        }
    }
}
