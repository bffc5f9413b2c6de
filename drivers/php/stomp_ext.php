<?php
// A driver (cases/clients/README.md) for the PHP stomp extension (Debian's php-stomp), its
// Stomp class as its documentation shows: new Stomp($broker, $login, $passcode), send,
// subscribe, then hasFrame and readFrame in a loop. It speaks STOMP 1.0: its CONNECT names
// no version (no accept-version) and it escapes no header nor sends heart-beats, so a
// connect offering 1.1 or 1.2 is unsupported. PHP has no thread: this driver polls the
// library between commands, hasFrame under a 20 ms read timeout (at the default, 2 s, a
// poll would hold the commands back), every command at the default read timeout. A send
// asking a receipt returns once the library has read that RECEIPT (it waits for it in the
// call: stomp.c stomp_valid_receipt), which the driver reports as the receipt. The Stomp
// class has no disconnect: destroying the object writes DISCONNECT, with no headers, and
// closes. It has no WebSocket transport: a ws:// url is unsupported.
//
//   php drivers/php/stomp_ext.php

require __DIR__ . '/contract.php';

$stomp = null;
$live = false;
$messages = [];
$destinations = []; // a subscription's id => its destination (unsubscribe takes both)
$timeout = null; // the read timeout the library starts with: [sec, usec]

function report(StompFrame $frame): void
{
    global $messages;
    if ($frame->command === 'MESSAGE') {
        $messages[] = $frame;
        emit('message', ['n' => count($messages) - 1, 'headers' => headers($frame->headers),
                         'body_b64' => b64($frame->body)]);
    } elseif ($frame->command === 'RECEIPT') {
        emit('receipt', ['id' => $frame->headers['receipt-id'] ?? '']);
    } elseif ($frame->command === 'ERROR') {
        emit('error', ['headers' => headers($frame->headers), 'body_b64' => b64($frame->body)]);
    } else {
        fwrite(STDERR, "readFrame gave a frame the driver does not report: {$frame->command}\n");
    }
}

// An ERROR frame with a message header, as the library raises it (php_stomp.c
// stomp_read_frame and stomp_connect: a StompException whose message is that header and
// whose details is the body).
function raised(StompException $e): void
{
    emit('error', ['headers' => headers(['message' => $e->getMessage()]),
                   'body_b64' => b64($e->getDetails())]);
}

function poll(): void
{
    global $stomp, $live, $timeout;
    if (!$live) {
        return;
    }
    $stomp->setReadTimeout(0, 20000);
    $waiting = $stomp->hasFrame();
    $stomp->setReadTimeout($timeout['sec'], $timeout['usec']);
    if (!$waiting) {
        return;
    }
    try {
        $frame = $stomp->readFrame();
    } catch (StompException $e) {
        raised($e);
        return;
    }
    if ($frame instanceof StompFrame) {
        report($frame);
    } elseif ($stomp->error() !== false && $stomp->error() !== '') {
        fwrite(STDERR, 'readFrame: ' . $stomp->error() . "\n");
        $live = false; // the connection is gone ("Sender closed connection unexpectedly")
        emit('disconnected');
    }
}

function run(string $op, array $c): void
{
    global $stomp, $live, $messages, $destinations, $timeout;
    if ($op === 'connect') {
        [$host, $port] = endpoint((string) $c['url']);
        $version = (string) ($c['version'] ?? '1.2');
        if ($version !== '1.0') {
            throw new Unsupported("STOMP $version: the stomp extension speaks 1.0 (no " .
                                  'accept-version, header escaping or heart-beating)');
        }
        try {
            $stomp = new Stomp("tcp://$host:$port", (string) ($c['login'] ?? ''),
                               (string) ($c['passcode'] ?? ''));
        } catch (StompException $e) {
            raised($e);
            throw $e;
        }
        $timeout = $stomp->getReadTimeout();
        $live = true;
        // the extension keeps the CONNECTED frame to itself: its session is what it hands on
        emit('connected', ['headers' => headers(['session' => $stomp->getSessionId()])]);
        return;
    }
    if (!$live) {
        throw new RuntimeException('not connected');
    }
    $txn = isset($c['transaction']) ? ['transaction' => (string) $c['transaction']] : [];
    switch ($op) {
        case 'send':
            $headers = array_map('strval', $c['headers'] ?? []);
            if (!empty($c['receipt'])) {
                $headers['receipt'] = (string) $c['receipt'];
            }
            $sent = $stomp->send((string) $c['destination'], body($c), $headers);
            if (!$sent) {
                throw new RuntimeException('send returned false: ' . $stomp->error());
            }
            if (!empty($c['receipt'])) {
                emit('receipt', ['id' => (string) $c['receipt']]);
            }
            return;
        case 'subscribe':
            $destinations[(string) $c['id']] = (string) $c['destination'];
            $stomp->subscribe((string) $c['destination'],
                              ['id' => (string) $c['id'], 'ack' => (string) ($c['ack'] ?? 'auto')]);
            return;
        case 'unsubscribe':
            // unsubscribe takes the destination (and writes it) as well as the id
            $stomp->unsubscribe($destinations[(string) $c['id']], ['id' => (string) $c['id']]);
            return;
        case 'ack':
        case 'nack':
            $stomp->$op($messages[(int) $c['message']], $txn);
            return;
        case 'begin':
        case 'commit':
        case 'abort':
            $stomp->$op((string) $c['transaction']);
            return;
        case 'disconnect':
            if (!empty($c['receipt'])) {
                throw new Unsupported('DISCONNECT asking a receipt: the Stomp class writes its ' .
                                      'DISCONNECT, with no headers, when it is destroyed');
            }
            $live = false;
            $stomp = null; // __destruct: DISCONNECT, then close
            return;
        default:
            throw new Unsupported("no command $op");
    }
}

serve('PECL stomp', phpversion('stomp'), 'run', 'poll');
