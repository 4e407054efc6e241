// A tcp DOCKER_HOST with TLS in front of a Podman service's unix socket, as `dockerd --tlsverify`
// serves one: socat (OpenSSL) forwards connections whose client certificate the engine's CA signed
// and refuses the others during the handshake with a TLS alert, as dockerd does. Certificates come
// from openssl: `trusted` holds a client certificate of the engine's CA, `untrusted` one of another
// CA (both trust the engine's server certificate).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { freePort } from '../../contract/ports';
import { waitFor } from '../support/wait';

export interface TlsFront {
  /** tcp://127.0.0.1:<port> */
  host: string;
  /** DOCKER_CERT_PATH of a client the engine accepts. */
  trusted: string;
  /** DOCKER_CERT_PATH of a client whose certificate another CA signed. */
  untrusted: string;
  close(): Promise<void>;
}

const openssl = (args: string[], cwd: string) =>
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });

function ca(dir: string, name: string): void {
  openssl(
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${name}`].concat([
      '-keyout',
      `${name}-key.pem`,
      '-out',
      `${name}.pem`,
    ]),
    dir,
  );
}

function signed(dir: string, name: string, caName: string, extensions: string): void {
  openssl(
    ['req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${name}`].concat([
      '-keyout',
      `${name}-key.pem`,
      '-out',
      `${name}.csr`,
    ]),
    dir,
  );
  writeFileSync(join(dir, `${name}.ext`), `${extensions}\n`);
  openssl(
    ['x509', '-req', '-in', `${name}.csr`, '-CA', `${caName}.pem`, '-CAkey', `${caName}-key.pem`].concat([
      '-CAcreateserial',
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
      '-out',
      `${name}.pem`,
    ]),
    dir,
  );
}

function certPath(dir: string, name: string, client: string): string {
  const out = join(dir, name);
  mkdirSync(out);
  copyFileSync(join(dir, 'engine-ca.pem'), join(out, 'ca.pem'));
  copyFileSync(join(dir, `${client}.pem`), join(out, 'cert.pem'));
  copyFileSync(join(dir, `${client}-key.pem`), join(out, 'key.pem'));
  return out;
}

export async function startTlsFront(socketPath: string, dir: string): Promise<TlsFront> {
  ca(dir, 'engine-ca');
  ca(dir, 'other-ca');
  signed(dir, 'server', 'engine-ca', 'subjectAltName=IP:127.0.0.1');
  signed(dir, 'client', 'engine-ca', 'extendedKeyUsage=clientAuth');
  signed(dir, 'stranger', 'other-ca', 'extendedKeyUsage=clientAuth');
  const port = await freePort();
  const listen = [
    `OPENSSL-LISTEN:${port}`,
    'bind=127.0.0.1',
    'reuseaddr',
    'fork',
    `cert=${join(dir, 'server.pem')}`,
    `key=${join(dir, 'server-key.pem')}`,
    `cafile=${join(dir, 'engine-ca.pem')}`,
    'verify=1',
  ].join(',');
  const child: ChildProcess = spawn('socat', [listen, `UNIX-CONNECT:${socketPath}`], {
    stdio: 'ignore',
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const listening = () =>
    new Promise<boolean>((resolve) => {
      const probe = connect(port, '127.0.0.1', () => {
        probe.destroy();
        resolve(true);
      });
      probe.on('error', () => resolve(false));
    });
  await waitFor(() => child.exitCode === null && listening(), 10_000, 'socat listens');
  return {
    host: `tcp://127.0.0.1:${port}`,
    trusted: certPath(dir, 'trusted', 'client'),
    untrusted: certPath(dir, 'untrusted', 'stranger'),
    async close() {
      // socat's forked children exit with their connections; the listener is the one to stop.
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
