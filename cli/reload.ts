// `singulacomp sessions reload`: asks for the reload, then follows reloadProgress over graphql-ws
// and shows each server-confirmed phase as it arrives — a spinner on a terminal, one plain line per
// finished phase otherwise. Resolves with the final reload; the caller exits non-zero on FAILED.
import {
  CliReloadProgressDocument,
  type ReloadFieldsFragment,
  CliReloadSessionDocument,
} from '../contract/generated/cli';
import { type ApiClient, unwrap } from './client';

export interface ReloadView {
  /** A phase started (spinner text) or finished (a line). */
  phase(name: string, status: string, message: string | null): void;
  done(reload: ReloadFieldsFragment): void;
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/** Spinner on a terminal: the running phase animates, each finished phase stays as a line. */
export function terminalView(out: NodeJS.WriteStream): ReloadView {
  let frame = 0;
  let current: string | null = null;
  const clear = () => out.write('\r\x1b[2K');
  const timer = setInterval(() => {
    if (!current) return;
    frame = (frame + 1) % FRAMES.length;
    clear();
    out.write(`${FRAMES[frame]} ${current}`);
  }, 80);
  return {
    phase(name, status, message) {
      clear();
      if (status === 'STARTED') {
        current = name;
        out.write(`${FRAMES[frame]} ${name}`);
        return;
      }
      current = null;
      out.write(status === 'SUCCEEDED' ? `✔ ${name}\n` : `✖ ${name}: ${message ?? 'failed'}\n`);
    },
    done(reload) {
      clearInterval(timer);
      clear();
      out.write(reload.status === 'SUCCEEDED' ? 'Reload succeeded.\n' : `Reload failed: ${reload.error}\n`);
    },
  };
}

/** Plain output for pipes and logs: one line per finished phase. */
export function plainView(out: NodeJS.WritableStream): ReloadView {
  return {
    phase(name, status, message) {
      if (status === 'SUCCEEDED') out.write(`${name} ok\n`);
      else if (status === 'FAILED') out.write(`${name} failed: ${message ?? 'failed'}\n`);
    },
    done(reload) {
      out.write(reload.status === 'SUCCEEDED' ? 'reload succeeded\n' : `reload failed: ${reload.error}\n`);
    },
  };
}

/** A view that shows nothing (for --json, which prints the final reload only). */
export const silentView: ReloadView = { phase: () => {}, done: () => {} };

export async function runReload(
  api: ApiClient,
  input: { sessionId: string; noRepo: boolean; force: boolean },
  view: ReloadView,
): Promise<ReloadFieldsFragment> {
  const started = unwrap(
    (await api.request(CliReloadSessionDocument, { input })).reloadSession,
    'ReloadSessionSuccess',
  ).reload;
  let shown = 0;
  let last: ReloadFieldsFragment = started;
  const show = (reload: ReloadFieldsFragment) => {
    for (const phase of reload.phases.slice(shown))
      view.phase(phase.name, phase.status, phase.message ?? null);
    shown = Math.max(shown, reload.phases.length);
    last = reload;
  };
  show(started);
  if (started.status === 'RUNNING') {
    // after: 0 replays every event of this reload first, so phases reported before the subscription
    // started are not missed.
    await api.subscribe(CliReloadProgressDocument, { reloadId: started.id, after: 0 }, (data) => {
      show(data.reloadProgress);
      return data.reloadProgress.status !== 'RUNNING';
    });
  }
  view.done(last);
  return last;
}
