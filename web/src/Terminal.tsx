// A shell in the sandbox: OpenCode's PTY API through the agent route (`/v1/sessions/<id>/agent/*`),
// drawn with xterm.js (loaded when the tab first opens: it stays out of the first bundle). The PTY
// is created on open and removed on close. A browser cannot put Authorization on a WebSocket, so the
// token travels as a subprotocol the server takes off before the sandbox sees the request.
import { type RefObject, useContext, useEffect, useRef, useState } from 'react';
import { useQuery } from 'urql';
import { ApiContext } from './api-context';
import { ViewerDocument } from './generated/graphql';
import { linkProps } from './router';

type State =
  | { kind: 'connecting' }
  | { kind: 'open'; ptyId: string }
  | { kind: 'closed'; reason: string }
  | { kind: 'failed'; reason: string };

/** OpenCode sends control frames as binary messages that start with a NUL byte (e.g. the cursor). */
function isControlFrame(data: unknown): boolean {
  return data instanceof ArrayBuffer && new Uint8Array(data)[0] === 0;
}

async function refusal(response: Response): Promise<string> {
  const body = (await response.json().catch(() => null)) as { error?: string } | null;
  return `HTTP ${response.status}: ${body?.error ?? response.statusText}`;
}

export function Terminal({ sessionId, live }: { sessionId: string; live: boolean }) {
  const [viewer] = useQuery({ query: ViewerDocument });
  const scopes = viewer.data?.viewer.scopes;
  // A new shell is a new Shell: everything the old one held is disposed with it.
  const [attempt, setAttempt] = useState(0);
  // Read by the Shell as it is disposed: a PTY of a sandbox that stopped went with it, and asking to
  // remove it would only be refused.
  const running = useRef(live);
  running.current = live;
  if (!live) {
    return (
      <p className="empty" data-testid="terminal-state" data-state="ended">
        The terminal needs the running sandbox, and this session has ended. Its changes are under Changes and
        its files under Files.
      </p>
    );
  }
  if (scopes && !scopes.includes('sessions:write')) {
    return (
      <p className="empty" data-testid="terminal-state" data-state="refused">
        A terminal runs commands in the sandbox, so it needs a token with <code>sessions:write</code>, and
        this one lacks it. Create one on <a {...linkProps('/account')}>the account page</a> and sign in with
        it.
      </p>
    );
  }
  return scopes ? (
    <Shell key={attempt} sessionId={sessionId} running={running} onRestart={() => setAttempt((n) => n + 1)} />
  ) : (
    <p aria-busy="true">Loading…</p>
  );
}

function Shell({
  sessionId,
  running,
  onRestart,
}: {
  sessionId: string;
  running: RefObject<boolean>;
  onRestart(): void;
}) {
  const api = useContext(ApiContext);
  const box = useRef<HTMLDivElement>(null);
  const [state, setState] = useState<State>({ kind: 'connecting' });

  useEffect(() => {
    if (!api || !box.current) return;
    const base = `/v1/sessions/${encodeURIComponent(sessionId)}/agent`;
    const headers = { authorization: `Bearer ${api.token}`, 'content-type': 'application/json' };
    let disposed = false;
    let cleanup = () => {};

    (async () => {
      const [{ Terminal: XTerm }, { FitAddon }] = await Promise.all([
        import('@xterm/xterm'),
        import('@xterm/addon-fit'),
        import('@xterm/xterm/css/xterm.css'),
      ]);
      if (disposed || !box.current) return;
      const created = await fetch(`${base}/pty`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ title: 'dashboard' }),
      });
      if (!created.ok) throw new Error(await refusal(created));
      const { id: ptyId } = (await created.json()) as { id: string };
      const remove = () => {
        if (running.current)
          void fetch(`${base}/pty/${encodeURIComponent(ptyId)}`, { method: 'DELETE', headers }).catch(
            () => {},
          );
      };
      if (disposed) return remove();

      const term = new XTerm({
        convertEol: false,
        cursorBlink: true,
        fontFamily: 'ui-monospace, "SFMono-Regular", Menlo, monospace',
        fontSize: 13,
        scrollback: 5_000,
      });
      const fit = new FitAddon();
      term.loadAddon(fit);
      term.open(box.current);
      fit.fit();
      const resize = () => {
        if (!running.current) return;
        void fetch(`${base}/pty/${encodeURIComponent(ptyId)}`, {
          method: 'PUT',
          headers,
          body: JSON.stringify({ size: { rows: term.rows, cols: term.cols } }),
        }).catch(() => {});
      };
      resize();
      const observer = new ResizeObserver(() => {
        // A hidden tab has no size to fit.
        if (!box.current?.offsetParent) return;
        const { cols, rows } = term;
        fit.fit();
        if (term.cols !== cols || term.rows !== rows) resize();
      });
      observer.observe(box.current);

      const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
      const ws = new WebSocket(
        `${scheme}//${location.host}${base}/pty/${encodeURIComponent(ptyId)}/connect`,
        ['singulacomp.v1', `singulacomp.bearer.${api.token}`],
      );
      ws.binaryType = 'arraybuffer';
      ws.onopen = () => {
        setState({ kind: 'open', ptyId });
        term.focus();
      };
      ws.onmessage = (event) => {
        if (isControlFrame(event.data)) return;
        term.write(typeof event.data === 'string' ? event.data : new Uint8Array(event.data as ArrayBuffer));
      };
      ws.onclose = (event) => {
        if (disposed) return;
        setState({
          kind: 'closed',
          reason: event.code === 1000 ? 'the shell exited' : `the connection closed (code ${event.code})`,
        });
      };
      const input = term.onData((data) => {
        if (ws.readyState === WebSocket.OPEN) ws.send(data);
      });
      cleanup = () => {
        input.dispose();
        observer.disconnect();
        ws.close();
        term.dispose();
        remove();
      };
      if (disposed) cleanup();
    })().catch((error: Error) => {
      if (!disposed) setState({ kind: 'failed', reason: error.message });
    });

    return () => {
      disposed = true;
      cleanup();
    };
  }, [api, sessionId, running]);

  return (
    <div className="terminal">
      <p data-testid="terminal-state" data-state={state.kind} aria-live="polite" className="muted">
        {state.kind === 'connecting' && 'Starting a shell in the sandbox…'}
        {state.kind === 'open' && 'A shell in the sandbox’s workspace. Closing the tab’s page ends it.'}
        {(state.kind === 'closed' || state.kind === 'failed') && (
          <>
            {state.kind === 'closed' ? 'The terminal ended: ' : 'The terminal could not start: '}
            {state.reason}.{' '}
            <button type="button" className="link" onClick={onRestart}>
              Start a new shell
            </button>
          </>
        )}
      </p>
      <div ref={box} className="xterm-box" data-testid="terminal" />
    </div>
  );
}
