'use strict';
// What the Node drivers share: the driver contract's two ends (cases/clients/README.md).
// Events go to standard output, one JSON line each; commands come from standard input, one
// JSON object a line, and run one at a time. An `exit` (or the input's end) ends the driver
// at once, even while a command waits.

const fs = require('fs');
const path = require('path');
const readline = require('readline');

/** What the library cannot do: reported `failed` with an error starting `unsupported`. */
class Unsupported extends Error {
  constructor(what) {
    super(`unsupported: ${what}`);
  }
}

function emit(event, fields = {}) {
  // a pipe is written synchronously on Linux: nothing is lost at process.exit
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}

/** Text (as UTF-8) or octets (Buffer, Uint8Array, ArrayBuffer) as base64. */
function b64(data) {
  if (data === undefined || data === null) return '';
  if (typeof data === 'string') return Buffer.from(data, 'utf8').toString('base64');
  if (data instanceof ArrayBuffer) return Buffer.from(data).toString('base64');
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64');
}

/** A command's body as a Buffer: `body_b64` decoded, or `body` as UTF-8. */
function body(command) {
  if ('body_b64' in command) return Buffer.from(String(command.body_b64), 'base64');
  return Buffer.from(String(command.body ?? ''), 'utf8');
}

/** A command's body as text, for a library that sends text only: `body`, or `body_b64`
 * when its octets are UTF-8; Unsupported for octets that are not (`library` names it). */
function text(command, library) {
  if (!('body_b64' in command)) return String(command.body ?? '');
  const octets = body(command);
  const decoded = octets.toString('utf8');
  if (!Buffer.from(decoded, 'utf8').equals(octets)) {
    throw new Unsupported(`a body of octets that are not UTF-8: ${library} sends text only`);
  }
  return decoded;
}

/** The url's scheme, host, port and path; Unsupported for a scheme not in `schemes`. */
function endpoint(url, schemes = ['tcp']) {
  const parts = new URL(String(url));
  const scheme = parts.protocol.replace(/:$/, '');
  if (!schemes.includes(scheme) || !parts.hostname || !parts.port) {
    throw new Unsupported(`url '${url}' (${schemes.map((s) => `${s}://`).join(' or ')} only)`);
  }
  return { scheme, host: parts.hostname, port: Number(parts.port), path: parts.pathname };
}

/** The command's heart_beat "cx,cy" as two numbers (0,0 when absent). */
function heartBeat(command) {
  const [cx, cy] = String(command.heart_beat || '0,0').split(',').map(Number);
  return [cx || 0, cy || 0];
}

/** The version of the package `name` as installed (its package.json, whatever it exports). */
function installed(name) {
  const entry = require.resolve(name);
  const marker = path.join('node_modules', name);
  const root = entry.slice(0, entry.lastIndexOf(marker) + marker.length);
  return JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).version;
}

/** Say `ready`, then run each command through `run(op, command)` (a promise), answering
 * `done` or `failed` once it settles. */
function serve(library, version, run) {
  // an exception a library throws from its own callbacks is its failure to report what
  // happened, not the driver's end: one line on standard error (the transcript keeps it)
  process.on('uncaughtException', (error) => {
    const where = String(error?.stack || error).split('\n').slice(0, 3).map((l) => l.trim());
    console.error(`uncaught exception in the library: ${where.join(' | ')}`);
  });
  emit('ready', { library, version });
  const waiting = [];
  let running = false;
  const next = async () => {
    if (running) return;
    running = true;
    while (waiting.length) {
      const { op, command } = waiting.shift();
      try {
        await run(op, command);
        emit('done', { op });
      } catch (error) {
        const text = error instanceof Unsupported ? error.message
          : `${error?.name || 'Error'}: ${error?.message || error}`;
        emit('failed', { op, error: text });
      }
    }
    running = false;
  };
  const input = readline.createInterface({ input: process.stdin });
  input.on('line', (line) => {
    let command;
    try {
      command = JSON.parse(line);
    } catch {
      command = null;
    }
    if (typeof command !== 'object' || command === null || typeof command.op !== 'string') {
      emit('failed', { op: '?', error: 'not a command line' });
      return;
    }
    const op = command.op;
    if (op === 'exit') process.exit(0);
    delete command.op;
    waiting.push({ op, command });
    next();
  });
  input.on('close', () => process.exit(0));
}

// The headers of a SEND the command asks for: its own, and a receipt when it wants one.
function sendHeaders(command) {
  return { ...(command.headers || {}), ...(command.receipt ? { receipt: String(command.receipt) } : {}) };
}

// The operations the stompjs family (@stomp/stompjs, the legacy stompjs, webstomp-client)
// spells alike: subscribe, unsubscribe, a message's own ack() and nack() (each library picks
// the headers: 1.2's ack header or message-id, and subscription), begin, commit and abort.
// True when `op` is one of them, done.
function familyOp(client, messages, deliver, op, command) {
  switch (op) {
    case 'subscribe':
      client.subscribe(String(command.destination), deliver,
        { id: String(command.id), ...(command.ack ? { ack: String(command.ack) } : {}) });
      return true;
    case 'unsubscribe':
      client.unsubscribe(String(command.id));
      return true;
    case 'ack':
    case 'nack':
      messages[Number(command.message)][op](
        command.transaction ? { transaction: String(command.transaction) } : {});
      return true;
    case 'begin':
    case 'commit':
    case 'abort':
      client[op](String(command.transaction));
      return true;
    default:
      return false;
  }
}

module.exports = {
  Unsupported, b64, body, emit, endpoint, familyOp, heartBeat, installed, sendHeaders, serve, text,
};
