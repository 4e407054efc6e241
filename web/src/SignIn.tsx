// Sign-in with a personal access token, kept in session storage (gone when the tab closes). A
// `?token=` in the address (the development link the server prints at start-up) fills the field and
// is removed from the address at once. Signed in already, the same form adds another account.
import { useState } from 'react';
import { type SignedInAccount, createApiClient } from './client';
import { type ApiProblem, Problem, problemFromError } from './errors';
import { ViewerDocument } from './generated/graphql';

const TOKEN = /^[A-Za-z0-9_.-]{1,4096}$/;

function tokenFromAddress(): string {
  const url = new URL(location.href);
  const token = url.searchParams.get('token');
  if (token === null) return '';
  url.searchParams.delete('token');
  history.replaceState(null, '', url.pathname + url.search + url.hash);
  return TOKEN.test(token) ? token : '';
}

export function SignIn({
  onSignedIn,
  onCancel,
}: {
  onSignedIn(account: SignedInAccount): void;
  /** Set while another account is signed in: back to it without adding one. */
  onCancel?: () => void;
}) {
  const [token, setToken] = useState(tokenFromAddress);
  const [problem, setProblem] = useState<ApiProblem | null>(null);
  const [busy, setBusy] = useState(false);

  async function submit(event: { preventDefault(): void }) {
    event.preventDefault();
    setBusy(true);
    setProblem(null);
    const api = createApiClient(token.trim());
    try {
      const result = await api.urql.query(ViewerDocument, {}, { requestPolicy: 'network-only' }).toPromise();
      if (result.error) setProblem(problemFromError(result.error));
      else if (result.data) {
        const { account } = result.data.viewer;
        onSignedIn({ accountId: account.id, name: account.name, tier: account.tier, token: token.trim() });
      }
    } finally {
      api.dispose();
      setBusy(false);
    }
  }

  return (
    <main className="signin">
      <h1>{onCancel ? 'Add an account' : 'SingulaComp'}</h1>
      <form onSubmit={submit}>
        <label htmlFor="token">Personal access token</label>
        <input
          id="token"
          name="token"
          type="password"
          autoComplete="off"
          spellCheck={false}
          placeholder="singulacomp_pat_…"
          value={token}
          onChange={(event) => setToken(event.target.value)}
          required
        />
        <button type="submit" disabled={busy || token.trim() === ''}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        {onCancel && (
          <button type="button" className="secondary" onClick={onCancel}>
            Cancel
          </button>
        )}
        <Problem problem={problem} />
      </form>
      <section className="hint" aria-labelledby="token-where">
        <h2 id="token-where">Where is my token?</h2>
        <ul>
          <li>
            On a server you started with <code>npm start</code>: the token is in{' '}
            <code>.data/bootstrap-token</code> in the server’s directory (under{' '}
            <code>SINGULACOMP_DATA_DIR</code> when that is set), so <code>cat .data/bootstrap-token</code>{' '}
            shows it. The first start prints the token itself, and every start prints where the file is and,
            in development, a sign-in link with the token filled in.
          </li>
          <li>
            Somebody else’s server: ask an account admin for a personal access token (Account → Tokens, or an
            invitation).
          </li>
        </ul>
      </section>
    </main>
  );
}
