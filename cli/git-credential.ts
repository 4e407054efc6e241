// `singulacomp git-credential get|store|erase`: the sandbox workspace's git credential helper
// (R-GIT-1). It answers only for the API's own origin (scheme, host and port of
// SINGULACOMP_API_URL) with SINGULACOMP_TOKEN, so the token is never handed to any other host.

/** Parses git's credential description (`key=value` lines up to a blank line). */
export function parseCredentialRequest(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line.trim() === '') break;
    const eq = line.indexOf('=');
    if (eq > 0) fields.set(line.slice(0, eq), line.slice(eq + 1).replace(/\r$/, ''));
  }
  return fields;
}

/** The answer to `get`, or '' when the request is not for the API's origin (git then tries nothing else). */
export function credentialAnswer(request: Map<string, string>, apiUrl: string, token: string): string {
  let api: URL;
  try {
    api = new URL(apiUrl);
  } catch {
    return '';
  }
  const protocol = request.get('protocol');
  const host = request.get('host');
  if (!protocol || !host || !token) return '';
  if (`${protocol}:` !== api.protocol || host.toLowerCase() !== api.host.toLowerCase()) return '';
  return `username=singulacomp\npassword=${token}\n`;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function gitCredential(
  operation: string,
  env: { apiUrl: string | null; token: string | null },
): Promise<void> {
  const input = await readStdin();
  // store/erase: nothing is stored, the token comes from the environment every time.
  if (operation !== 'get' || !env.apiUrl || !env.token) return;
  process.stdout.write(credentialAnswer(parseCredentialRequest(input), env.apiUrl, env.token));
}
