// A history-API router: the server answers every client route with index.html.
import { useEffect, useState } from 'react';

export type Route =
  | { page: 'sessions' }
  | { page: 'session'; id: string }
  | { page: 'account' }
  | { page: 'projects' }
  | { page: 'project'; id: string }
  | { page: 'not-found' };

export function parseRoute(path: string): Route {
  if (path === '/' || path === '/sessions') return { page: 'sessions' };
  if (path === '/account') return { page: 'account' };
  if (path === '/projects') return { page: 'projects' };
  const project = /^\/projects\/([^/]+)$/.exec(path);
  if (project) return { page: 'project', id: decodeURIComponent(project[1]!) };
  const session = /^\/sessions\/([^/]+)$/.exec(path);
  if (session) return { page: 'session', id: decodeURIComponent(session[1]!) };
  return { page: 'not-found' };
}

export function navigate(path: string): void {
  history.pushState(null, '', path);
  dispatchEvent(new PopStateEvent('popstate'));
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.pathname));
  useEffect(() => {
    const update = () => setRoute(parseRoute(location.pathname));
    addEventListener('popstate', update);
    return () => removeEventListener('popstate', update);
  }, []);
  return route;
}

/** An in-app link: a real <a href> (middle-click, keyboard) that navigates without a page load. */
export function linkProps(path: string) {
  return {
    href: path,
    onClick: (event: { preventDefault(): void; metaKey: boolean; ctrlKey: boolean; button: number }) => {
      if (event.metaKey || event.ctrlKey || event.button !== 0) return;
      event.preventDefault();
      navigate(path);
    },
  };
}
