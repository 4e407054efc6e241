// A port of the sandbox in an iframe (a signed `Sandbox.previewUrl`), and the share-link dialog
// (`createShareLink`: a public URL for people without a token). The frame shows the preview site,
// an origin of its own per sandbox port (never the dashboard's), so the app keeps its own origin
// (its cookies, storage and service worker work) and still cannot reach the dashboard's session
// storage, where the token is. A preview URL on the dashboard's own origin is never framed.
import { type RefObject, useRef, useState } from 'react';
import { useClient, useMutation } from 'urql';
import { type ApiProblem, Problem, problemFromError, problemFromPayload } from './errors';
import { CreateShareLinkDocument, PreviewUrlDocument, type ShareLinkMode } from './generated/graphql';

const HOUR_MS = 3_600_000;

export function Preview({ sandboxId, live }: { sandboxId: string; live: boolean }) {
  const client = useClient();
  const [port, setPort] = useState('3000');
  const [frame, setFrame] = useState<{ port: number; url: string } | null>(null);
  const [loading, setLoading] = useState(false);
  const [problem, setProblem] = useState<ApiProblem | null>(null);
  const dialog = useRef<HTMLDialogElement>(null);

  async function open(event: { preventDefault(): void }) {
    event.preventDefault();
    setProblem(null);
    setLoading(true);
    const n = Number(port);
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
              onChange={(e) => setPort(e.target.value)}
            />
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
