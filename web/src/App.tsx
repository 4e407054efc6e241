import { useEffect, useMemo, useState } from 'react';
import { Provider, useQuery } from 'urql';
import { type ApiClient, createApiClient, storeToken, storedToken } from './client';
import { Problem, problemFromError } from './errors';
import { ViewerDocument } from './generated/graphql';
import { linkProps, useRoute } from './router';
import { SessionPage } from './SessionPage';
import { Sessions } from './Sessions';
import { SignIn } from './SignIn';
import { ApiContext } from './api-context';
import { Account } from './Account';
import { ProjectPage, Projects } from './Projects';

export function App() {
  const [token, setToken] = useState(storedToken);
  const api = useMemo<ApiClient | null>(() => (token ? createApiClient(token) : null), [token]);
  useEffect(() => () => api?.dispose(), [api]);
  if (!token || !api) {
    return (
      <SignIn
        onSignedIn={(value) => {
          storeToken(value);
          setToken(value);
        }}
      />
    );
  }
  return (
    <ApiContext.Provider value={api}>
      <Provider value={api.urql}>
        <Shell
          onSignOut={() => {
            storeToken(null);
            setToken(null);
          }}
        />
      </Provider>
    </ApiContext.Provider>
  );
}

function Shell({ onSignOut }: { onSignOut(): void }) {
  const route = useRoute();
  const [viewer] = useQuery({ query: ViewerDocument });
  const account = viewer.data?.viewer.account;
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
        <button type="button" onClick={onSignOut}>
          Sign out
        </button>
      </header>
      <main>
        {viewer.error && <Problem problem={problemFromError(viewer.error)} />}
        {route.page === 'sessions' && <Sessions />}
        {route.page === 'session' && <SessionPage id={route.id} />}
        {route.page === 'account' && <Account />}
        {route.page === 'projects' && <Projects />}
        {route.page === 'project' && <ProjectPage id={route.id} />}
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
