// A port of the sandbox in an iframe (a signed `Sandbox.previewUrl`), picked from the ports the
// sandbox listens on (`Sandbox.ports`; a port nothing listens on is explained, not framed), and the
// share-link dialog (`createShareLink`: a public URL for people without a token). The frame shows the
// preview site, an origin of its own per sandbox port (never the dashboard's), so the app keeps its
// own origin (its cookies, storage and service worker work) and still cannot reach the dashboard's
// session storage, where the token is. A preview URL on the dashboard's own origin is never framed.
import { type RefObject, useEffect, useRef, useState } from 'react';
import { useClient, useMutation } from 'urql';
import { type ApiProblem, Problem, problemFromError, problemFromPayload } from './errors';
import { CreateShareLinkDocument, PreviewUrlDocument, type ShareLinkMode } from './generated/graphql';

const HOUR_MS = 3_600_000;

export function Preview({
  sandboxId,
  live,
  ports,
}: {
  sandboxId: string;
  live: boolean;
  /** The sandbox's listening ports as its daemon reported them (null: not known). */
  ports: number[] | null;
}) {
  const client = useClient();
  const [port, setPort] = useState(() => String(ports?.[0] ?? 3000));
  const [silent, setSilent] = useState<number | null>(null);
  // The first port reported after the tab opened is the one a person most likely wants.
  const [touched, setTouched] = useState(false);
  const firstPort = ports?.[0];
  useEffect(() => {
    if (!touched && firstPort !== undefined) setPort(String(firstPort));
  }, [firstPort, touched]);
  const [frame, setFrame] = useState<{ port: number; url: string } | null>(null);
  const [loading, setLoading] = useState(false);
  const [problem, setProblem] = useState<ApiProblem | null>(null);
  const dialog = useRef<HTMLDialogElement>(null);

  async function open(event: { preventDefault(): void }, anyway = false) {
    event.preventDefault();
    setProblem(null);
    const n = Number(port);
    // Nothing listens there: say so and list what does, rather than frame the proxy's JSON error.
    // (The report trails a server that just started by a few seconds: it can be opened anyway.)
    if (ports && !ports.includes(n) && !anyway) {
      setFrame(null);
      setSilent(n);
      return;
    }
    setSilent(null);
    setLoading(true);
    const result = await client
      .query(PreviewUrlDocument, { id: sandboxId, port: n }, { requestPolicy: 'network-only' })
      .toPromise();
    setLoading(false);
    if (result.error) return setProblem(problemFromError(result.error));
    const url = result.data?.sandbox?.previewUrl.url;
    // allow-same-origin is safe only because the preview's origin is not ours.
    if (url && new URL(url).origin === window.location.origin) {
      return setProblem({
        code: 'PREVIEW_ON_DASHBOARD_ORIGIN',
        message:
          'This preview would open on the dashboard’s own origin, so it is not shown; set SINGULACOMP_PREVIEW_DOMAIN to a domain of its own.',
      });
    }
    if (url) setFrame({ port: n, url });
  }

  return (
    <section className="card" aria-labelledby="preview-title">
      <div className="section-head">
        <h2 id="preview-title">Preview</h2>
        <form className="inline" onSubmit={open}>
          <label>
            Port{' '}
            <input
              name="port"
              type="number"
              min={1}
              max={65535}
              required
              value={port}
              list={`ports-${sandboxId}`}
              onChange={(e) => {
                setTouched(true);
                setPort(e.target.value);
              }}
            />
            <datalist id={`ports-${sandboxId}`}>
              {ports?.map((p) => (
                <option key={p} value={p} />
              ))}
            </datalist>
          </label>
          <button type="submit" disabled={!live || loading}>
            {loading ? 'Opening…' : 'Open preview'}
          </button>
          <button type="button" disabled={!live} onClick={() => dialog.current?.showModal()}>
            Share…
          </button>
        </form>
      </div>
      <Problem problem={problem} />
      {ports && (
        <div className="ports" data-testid="ports">
          {ports.length === 0 ? (
            <p className="muted">
              Nothing in the sandbox listens on a port yet. Start a server (ask the agent, or use the Terminal
              tab) and it appears here within a few seconds.
            </p>
          ) : (
            <p>
              Listening:{' '}
              {ports.map((p) => (
                <button
                  key={p}
                  type="button"
                  className="port"
                  data-port={p}
                  aria-pressed={String(p) === port}
                  disabled={!live}
                  onClick={() => {
                    setTouched(true);
                    setPort(String(p));
                  }}
                >
                  {p}
                </button>
              ))}
            </p>
          )}
        </div>
      )}
      {silent !== null && (
        <div className="nothing-listens" role="status" data-testid="nothing-listens">
          <h3>Nothing listens on port {silent}</h3>
          <p>
            {ports && ports.length > 0
              ? `The sandbox listens on ${ports.join(', ')}: choose one of those above, or start a server on ${silent} and open it again.`
              : `No process in the sandbox listens on a port. Start a server on ${silent} (ask the agent, or use the Terminal tab) and open it again.`}
          </p>
          <button type="button" className="secondary" disabled={!live} onClick={(e) => void open(e, true)}>
            Open port {silent} anyway
          </button>
        </div>
      )}
      {frame && (
        <iframe
          className="preview"
          title={`Preview of port ${frame.port}`}
          src={frame.url}
          sandbox="allow-scripts allow-forms allow-popups allow-same-origin"
          referrerPolicy="no-referrer"
        />
      )}
      <ShareDialog dialogRef={dialog} sandboxId={sandboxId} port={Number(port)} />
    </section>
  );
}

function ShareDialog({
  dialogRef,
  sandboxId,
  port,
}: {
  dialogRef: RefObject<HTMLDialogElement | null>;
  sandboxId: string;
  port: number;
}) {
  const [creating, create] = useMutation(CreateShareLinkDocument);
  const [mode, setMode] = useState<ShareLinkMode>('VIEW_ONLY');
  const [hours, setHours] = useState('24');
  const [link, setLink] = useState<{ url: string; expiresAt: string } | null>(null);
  const [problem, setProblem] = useState<ApiProblem | null>(null);

  async function submit(event: { preventDefault(): void }) {
    event.preventDefault();
    setProblem(null);
    setLink(null);
    const expiresAt = new Date(Date.now() + Number(hours) * HOUR_MS).toISOString();
    const result = await create({ input: { sandboxId, port, mode, expiresAt } });
    if (result.error) return setProblem(problemFromError(result.error));
    const payload = result.data?.createShareLink;
    if (payload?.__typename === 'CreateShareLinkSuccess') {
      setLink({ url: payload.url, expiresAt: payload.shareLink.expiresAt });
    } else if (payload) setProblem(problemFromPayload(payload));
  }

  return (
    <dialog ref={dialogRef} aria-labelledby="share-title" className="share">
      <h2 id="share-title">Share port {port}</h2>
      <form className="create" onSubmit={submit}>
        <label>
          Access
          <select name="mode" value={mode} onChange={(e) => setMode(e.target.value as ShareLinkMode)}>
            <option value="VIEW_ONLY">view only (GET, HEAD)</option>
            <option value="INTERACTIVE">interactive (every method, WebSocket)</option>
          </select>
        </label>
        <label>
          Expires in (hours)
          <input
            name="hours"
            type="number"
            min={1}
            max={720}
            required
            value={hours}
            onChange={(e) => setHours(e.target.value)}
          />
        </label>
        <button type="submit" disabled={creating.fetching}>
          {creating.fetching ? 'Creating…' : 'Create link'}
        </button>
      </form>
      {link && (
        <div className="secret" role="status">
          <p>
            Anyone with this link can open port {port} until {new Date(link.expiresAt).toLocaleString()}:
          </p>
          <output className="mono" data-testid="share-url">
            {link.url}
          </output>
        </div>
      )}
      <Problem problem={problem} />
      <form method="dialog">
        <button type="submit">Close</button>
      </form>
    </dialog>
  );
}
