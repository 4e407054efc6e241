import { Suspense, lazy, useEffect, useMemo, useState } from 'react';
import { Provider, useQuery } from 'urql';
import {
  type ApiClient,
  type SignedInAccount,
  createApiClient,
  forgetAccount,
  rememberAccount,
  storeToken,
  storedAccounts,
  storedToken,
} from './client';
import { Problem, problemFromError } from './errors';
import { ViewerDocument } from './generated/graphql';
import { linkProps, useRoute } from './router';
import { Sessions } from './Sessions';
import { SignIn } from './SignIn';
import { ApiContext } from './api-context';

// The pages other than the sessions list load when first visited: the first load (a signed-in
// sessions list) does not carry the session page's workspace, the projects or the account.
const SessionPage = lazy(() => import('./SessionPage').then((m) => ({ default: m.SessionPage })));
const Account = lazy(() => import('./Account').then((m) => ({ default: m.Account })));
const Projects = lazy(() => import('./Projects').then((m) => ({ default: m.Projects })));
const ProjectPage = lazy(() => import('./Projects').then((m) => ({ default: m.ProjectPage })));

export function App() {
  const [token, setToken] = useState(storedToken);
  const [accounts, setAccounts] = useState(storedAccounts);
  const [adding, setAdding] = useState(false);
  const api = useMemo<ApiClient | null>(() => (token ? createApiClient(token) : null), [token]);
  useEffect(() => () => api?.dispose(), [api]);

  const use = (value: string | null) => {
    storeToken(value);
    setToken(value);
  };
  if (!token || !api || adding) {
    return (
      <SignIn
        onSignedIn={(account) => {
          setAccounts(rememberAccount(account));
          setAdding(false);
          use(account.token);
        }}
        onCancel={token ? () => setAdding(false) : undefined}
      />
    );
  }
  return (
    <ApiContext.Provider value={api}>
      <Provider value={api.urql}>
        {/* Keyed by token: another account's pages start from nothing, not from this one's state. */}
        <Shell
          key={token}
          token={token}
          accounts={accounts}
          onViewer={(account) => setAccounts(rememberAccount(account))}
          onSwitch={use}
          onAdd={() => setAdding(true)}
          onSignOut={() => {
            const left = forgetAccount(token);
            setAccounts(left);
            use(left[0]?.token ?? null);
          }}
        />
      </Provider>
    </ApiContext.Provider>
  );
}

function Shell({
  token,
  accounts,
  onViewer,
  onSwitch,
  onAdd,
  onSignOut,
}: {
  token: string;
  accounts: SignedInAccount[];
  onViewer(account: SignedInAccount): void;
  onSwitch(token: string): void;
  onAdd(): void;
  onSignOut(): void;
}) {
  const route = useRoute();
  const [viewer] = useQuery({ query: ViewerDocument });
  const account = viewer.data?.viewer.account;
  const known = accounts.some((a) => a.token === token && a.name === account?.name);
  // A token set before this tab kept a list (or by a script) joins the list once it is known.
  useEffect(() => {
    if (account && !known) onViewer({ accountId: account.id, name: account.name, tier: account.tier, token });
  }, [account, known, token, onViewer]);
  return (
    <>
      <header className="topbar">
        <a className="brand" {...linkProps('/')}>
          SingulaComp
        </a>
        <nav aria-label="Main">
          <a {...linkProps('/')} aria-current={route.page === 'sessions' ? 'page' : undefined}>
            Sessions
          </a>
          <a
            {...linkProps('/projects')}
            aria-current={route.page === 'projects' || route.page === 'project' ? 'page' : undefined}
          >
            Projects
          </a>
          <a {...linkProps('/account')} aria-current={route.page === 'account' ? 'page' : undefined}>
            Account
          </a>
        </nav>
        <span className="who" data-testid="account">
          {account ? `${account.name} · ${account.tier}` : ''}
        </span>
        {accounts.length > 1 && (
          <label className="switcher">
            <span className="visually-hidden">Switch account</span>
            {/* Values are account ids: a token is never written into the page. */}
            <select
              value={accounts.find((a) => a.token === token)?.accountId ?? ''}
              onChange={(e) => {
                const chosen = accounts.find((a) => a.accountId === e.target.value);
                if (chosen) onSwitch(chosen.token);
              }}
              data-testid="account-switcher"
            >
              {accounts.map((a) => (
                <option key={a.accountId} value={a.accountId}>
                  {a.name} · {a.tier}
                </option>
              ))}
            </select>
          </label>
        )}
        <button type="button" onClick={onAdd}>
          Add account
        </button>
        <button type="button" onClick={onSignOut}>
          {accounts.length > 1 && account ? `Sign out of ${account.name}` : 'Sign out'}
        </button>
      </header>
      <main>
        {viewer.error && <Problem problem={problemFromError(viewer.error)} />}
        {route.page === 'sessions' && <Sessions />}
        <Suspense fallback={<p aria-busy="true">Loading…</p>}>
          {route.page === 'session' && <SessionPage id={route.id} />}
          {route.page === 'account' && <Account />}
          {route.page === 'projects' && <Projects />}
          {route.page === 'project' && <ProjectPage id={route.id} />}
        </Suspense>
        {route.page === 'not-found' && (
          <section>
            <h1>Not found</h1>
            <p>
              Nothing lives at this address. <a {...linkProps('/')}>Back to the sessions</a>.
            </p>
          </section>
        )}
      </main>
    </>
  );
}
