// Runs as the first process inside an isolated LOCAL sandbox (bubblewrap, own network namespace
// with loopback only). The sandbox can reach nothing on the host but what the server chose to
// expose as Unix sockets in its run dir, and the host reaches the daemon only through one socket:
//   egress:  127.0.0.1:<port> inside  →  <run>/egress/<port>.sock  →  the host listener (API, …)
//   ingress: <run>/ingress/service.sock  →  127.0.0.1:<servicePort> inside (the daemon)
// Then it runs the entry command and exits with its status. It outlives SIGTERM (which reaches the
// whole process group) until the entry has exited, so a daemon shutting down can still reach the API.
// Kept to erasable TypeScript and node: builtins: Node runs it directly, without a loader.
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { type Server, type Socket, connect, createServer } from 'node:net';
import { join } from 'node:path';

interface BridgeSpec {
  runDir: string;
  egressPorts: number[];
  servicePort: number;
}

function pipeBoth(a: Socket, b: Socket): void {
  a.pipe(b);
  b.pipe(a);
  a.on('error', () => b.destroy());
  b.on('error', () => a.destroy());
  a.on('close', () => b.destroy());
  b.on('close', () => a.destroy());
}

function listen(server: Server, target: number | string, host?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    if (typeof target === 'number') server.listen(target, host, resolve);
    else server.listen(target, resolve);
  });
}

async function main(): Promise<void> {
  const [specJson, ...command] = process.argv.slice(2);
  if (!specJson || command.length === 0) {
    process.stderr.write('usage: local-bridge <spec-json> <command...>\n');
    process.exit(2);
  }
  const spec = JSON.parse(specJson) as BridgeSpec;
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

  const [file, ...args] = command as [string, ...string[]];
  const child = spawn(file, args, { stdio: 'inherit' });
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
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

main().catch((error: unknown) => {
  process.stderr.write(`local-bridge: ${(error as Error).message}\n`);
  process.exit(1);
});
