// Runs as the first process inside an isolated LOCAL sandbox (bubblewrap, own network namespace
// with loopback only). The sandbox can reach nothing on the host but what the server chose to
// expose as Unix sockets in its run dir, and the host reaches the daemon only through one socket:
//   egress:  127.0.0.1:<port> inside  →  <run>/egress/<port>.sock  →  the host listener (API, …)
//   ingress: <run>/ingress/service.sock  →  127.0.0.1:<servicePort> inside (the daemon)
// Then it runs the entry command and exits with its status. It outlives SIGTERM (which reaches the
// whole process group) until the entry has exited, so a daemon shutting down can still reach the API.
// A held bridge (spec.held) is started while the server still prepares the workspace: it opens its
// bridges, then runs the entry only once the line `go` arrives on its stdin, and exits without
// running it when its stdin ends first or a signal comes (the server gave up on the sandbox, or died).
// Plain JavaScript on node: builtins: Node runs it directly, without a loader. As TypeScript, Node's
// type stripping alone added about 100 ms to every sandbox's start.
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';

/**
 * @typedef {object} BridgeSpec
 * @property {string} runDir
 * @property {number[]} egressPorts
 * @property {number} servicePort
 * @property {boolean} [held]
 */

/** What the server writes to a held bridge's stdin (BRIDGE_GO in local-isolation.ts). */
const GO = 'go';

/**
 * @param {import('node:net').Socket} a
 * @param {import('node:net').Socket} b
 */
function pipeBoth(a, b) {
  a.pipe(b);
  b.pipe(a);
  a.on('error', () => b.destroy());
  b.on('error', () => a.destroy());
  a.on('close', () => b.destroy());
  b.on('close', () => a.destroy());
}

/**
 * @param {import('node:net').Server} server
 * @param {number | string} target
 * @param {string} [host]
 * @returns {Promise<void>}
 */
function listen(server, target, host) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    if (typeof target === 'number') server.listen(target, host, resolve);
    else server.listen(target, resolve);
  });
}

/**
 * Resolves when the line `go` arrives on stdin; exits (status 1) when stdin ends before it.
 * @returns {Promise<void>}
 */
function go() {
  return new Promise((resolve) => {
    let text = '';
    let released = false;
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', (chunk) => {
      text += chunk;
      if (released || !text.split('\n').slice(0, -1).includes(GO)) return;
      released = true;
      process.stdin.destroy();
      resolve();
    });
    process.stdin.on('end', () => {
      if (!released) process.exit(1);
    });
  });
}

/** @returns {Promise<void>} */
async function main() {
  const [specJson, ...command] = process.argv.slice(2);
  if (!specJson || command.length === 0) {
    process.stderr.write('usage: local-bridge <spec-json> <command...>\n');
    process.exit(2);
  }
  /** @type {BridgeSpec} */
  const spec = JSON.parse(specJson);
  for (const port of spec.egressPorts) {
    const server = createServer((client) =>
      pipeBoth(client, connect(join(spec.runDir, 'egress', `${port}.sock`))),
    );
    await listen(server, port, '127.0.0.1');
  }
  const ingressPath = join(spec.runDir, 'ingress', 'service.sock');
  rmSync(ingressPath, { force: true });
  const ingress = createServer((client) => pipeBoth(client, connect(spec.servicePort, '127.0.0.1')));
  await listen(ingress, ingressPath);

  if (spec.held) {
    // Nothing to outlive yet: a stop before the go ends the bridge at once.
    const stop = () => process.exit(1);
    for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, stop);
    await go();
    for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.off(signal, stop);
  }
  const [file, ...args] = command;
  // stdin is the server's go pipe when held, else nothing: the entry gets neither.
  const child = spawn(file, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
    process.on(signal, () => {
      // The process group already delivered it to the entry; keep the bridges up until it exits.
    });
  }
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
  child.on('error', (error) => {
    process.stderr.write(`local-bridge: ${error.message}\n`);
    process.exit(127);
  });
}

main().catch((error) => {
  process.stderr.write(`local-bridge: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
