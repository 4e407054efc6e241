// R-AG-6: moves old attachment bytes (all but the newest `keepPerSession` per session) and every
// tool result OpenCode's compaction already cleared out of OpenCode's SQLite transcript into
// `<home>/.local/share/singulacomp/attachments/<id>`, leaving a 1×1 PNG data URL placeholder and a
// `singulacomp.offloaded` marker. `/singulacomp/part/<id>` serves the bytes back.
//
// OpenCode 1.18 stores its transcript in `<HOME>/.local/share/opencode/opencode.db` (WAL):
//   part(id, message_id, session_id, time_created, time_updated, data JSON)
//     file part: { type: 'file', mime, filename?, url: 'data:<mime>;base64,…' }
//     tool part: { type: 'tool', tool, callID, state: { status, output, time: { start, end, compacted? },
//                  attachments?: FilePart[] } }
//   event(id, aggregate_id, seq, type, data JSON): 'message.part.updated.1' rows repeat the part
//     under `$.part`, so they are rewritten too or the bytes would stay in the file.
import { mkdir, readdir, readFile, stat, writeFile } from './fs';
import { join } from 'node:path';
import type { Logger } from './logger';
import { runSqlite, type SqlStatement, type SqliteOptions, writeSqlite } from './sqlite';

/** A 1×1 transparent PNG. */
export const PLACEHOLDER_PNG_DATA_URL =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';
export const OFFLOAD_MARKER = 'singulacomp.offloaded';
const OUTPUT_PLACEHOLDER = '[Old tool result content cleared]';

export interface OffloadMarker {
  id: string;
  mime: string;
  bytes: number;
  at: number;
  url: string;
}

export interface OffloadedMeta {
  id: string;
  mime: string;
  filename?: string;
  sessionId: string;
  partId: string;
  kind: 'file' | 'tool-attachment' | 'tool-output';
}

export interface OffloadResult {
  attachments: number;
  toolOutputs: number;
  bytes: number;
  parts: number;
}

export interface OffloaderOptions {
  logger: Logger;
  /** OpenCode's HOME (the transcript lives under it). */
  home: string;
  /** @default `<home>/.local/share/singulacomp/attachments` */
  attachmentsDir?: string;
  /** @default 12 */
  keepPerSession?: number;
  sqlite?: SqliteOptions;
  /** Explicit transcript path; default: the newest `opencode*.db` under `<home>/.local/share/opencode`. */
  dbPath?: string;
}

interface PartRow {
  id: string;
  session_id: string;
  time_created: number;
  data: string;
}

interface FileLike {
  id?: string;
  type?: string;
  mime?: string;
  filename?: string;
  url?: string;
  [OFFLOAD_MARKER]?: OffloadMarker;
}

interface Candidate {
  row: PartRow;
  data: Record<string, unknown>;
  /** attachment index inside a tool part's state, or -1 for a file part */
  index: number;
  file: FileLike;
  compacted: boolean;
}

function decodeDataUrl(url: string): { mime: string; bytes: Buffer } | null {
  const match = /^data:([^;,]*)((?:;[^;,]*)*?),(.*)$/s.exec(url);
  if (!match) return null;
  const isBase64 = match[2]!.split(';').includes('base64');
  const bytes = isBase64
    ? Buffer.from(match[3]!, 'base64')
    : Buffer.from(decodeURIComponent(match[3]!), 'utf8');
  return { mime: match[1] || 'application/octet-stream', bytes };
}

function isLive(file: FileLike | undefined): file is FileLike {
  return !!file && typeof file.url === 'string' && file.url.startsWith('data:') && !file[OFFLOAD_MARKER];
}

export class Offloader {
  readonly attachmentsDir: string;
  private readonly keep: number;
  private readonly log: Logger;
  private running: Promise<OffloadResult> | null = null;

  constructor(private readonly options: OffloaderOptions) {
    this.attachmentsDir =
      options.attachmentsDir ?? join(options.home, '.local', 'share', 'singulacomp', 'attachments');
    this.keep = options.keepPerSession ?? 12;
    this.log = options.logger.child({ module: 'offload' });
  }

  /** The transcript database, or null before OpenCode created one. */
  async findDb(): Promise<string | null> {
    if (this.options.dbPath) return this.options.dbPath;
    const dir = join(this.options.home, '.local', 'share', 'opencode');
    const names = await readdir(dir).catch(() => [] as string[]);
    let best: { path: string; mtime: number } | null = null;
    for (const name of names) {
      if (!/^opencode.*\.db$/.test(name)) continue;
      const path = join(dir, name);
      const info = await stat(path).catch(() => null);
      if (info && (!best || info.mtimeMs > best.mtime)) best = { path, mtime: info.mtimeMs };
    }
    return best?.path ?? null;
  }

  /** One pass; concurrent calls share the pass in progress. */
  run(): Promise<OffloadResult> {
    this.running ??= this.pass().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async pass(): Promise<OffloadResult> {
    const result: OffloadResult = { attachments: 0, toolOutputs: 0, bytes: 0, parts: 0 };
    const db = await this.findDb();
    if (!db) return result;
    const rows = await runSqlite<PartRow>(
      db,
      `SELECT id, session_id, time_created, data FROM part
        WHERE (json_extract(data, '$.type') = 'file' AND json_extract(data, '$.url') LIKE 'data:%'
               AND json_extract(data, '$."${OFFLOAD_MARKER}"') IS NULL)
           OR (json_extract(data, '$.type') = 'tool'
               AND (json_extract(data, '$.state.time.compacted') IS NOT NULL OR instr(data, '"url":"data:') > 0))
        ORDER BY session_id, time_created DESC, id DESC;`,
      [],
      this.options.sqlite,
    );

    // Newest first per session: the first `keep` attachments stay.
    const perSession = new Map<string, number>();
    const changed = new Map<string, Candidate['data']>();
    const outputs: Array<{ row: PartRow; data: Record<string, unknown> }> = [];
    const moves: Candidate[] = [];
    for (const row of rows) {
      const data = JSON.parse(row.data) as Record<string, unknown>;
      const state = data.state as
        | {
            output?: unknown;
            time?: { compacted?: number };
            attachments?: FileLike[];
            [OFFLOAD_MARKER]?: unknown;
          }
        | undefined;
      const compacted =
        data.type === 'tool' && state?.time?.compacted !== undefined && state.time.compacted !== null;
      const files: Array<{ file: FileLike; index: number }> =
        data.type === 'file'
          ? [{ file: data as FileLike, index: -1 }]
          : (state?.attachments ?? []).map((file, index) => ({ file, index })).reverse();
      for (const { file, index } of files) {
        if (!isLive(file)) continue;
        const seen = perSession.get(row.session_id) ?? 0;
        if (!compacted) perSession.set(row.session_id, seen + 1);
        if (compacted || seen >= this.keep) moves.push({ row, data, index, file, compacted });
      }
      if (compacted && state && typeof state.output === 'string' && !state[OFFLOAD_MARKER]) {
        outputs.push({ row, data });
      }
    }
    if (moves.length === 0 && outputs.length === 0) return result;

    await mkdir(this.attachmentsDir, { recursive: true });
    const now = Date.now();
    for (const move of moves) {
      const decoded = decodeDataUrl(move.file.url!);
      if (!decoded) continue;
      const id = move.file.id ?? (move.index === -1 ? move.row.id : `${move.row.id}-${move.index}`);
      await this.store(id, decoded.bytes, {
        id,
        mime: move.file.mime ?? decoded.mime,
        filename: move.file.filename,
        sessionId: move.row.session_id,
        partId: move.row.id,
        kind: move.index === -1 ? 'file' : 'tool-attachment',
      });
      const marker: OffloadMarker = {
        id,
        mime: move.file.mime ?? decoded.mime,
        bytes: decoded.bytes.length,
        at: now,
        url: `/singulacomp/part/${id}`,
      };
      move.file.url = PLACEHOLDER_PNG_DATA_URL;
      move.file.mime = 'image/png';
      move.file[OFFLOAD_MARKER] = marker;
      changed.set(move.row.id, move.data);
      result.attachments += 1;
      result.bytes += decoded.bytes.length;
    }
    for (const { row, data } of outputs) {
      const state = data.state as Record<string, unknown>;
      const bytes = Buffer.from(String(state.output), 'utf8');
      const id = `${row.id}-output`;
      await this.store(id, bytes, {
        id,
        mime: 'text/plain; charset=utf-8',
        sessionId: row.session_id,
        partId: row.id,
        kind: 'tool-output',
      });
      state.output = OUTPUT_PLACEHOLDER;
      state[OFFLOAD_MARKER] = {
        id,
        mime: 'text/plain; charset=utf-8',
        bytes: bytes.length,
        at: now,
        url: `/singulacomp/part/${id}`,
      } satisfies OffloadMarker;
      changed.set(row.id, data);
      result.toolOutputs += 1;
      result.bytes += bytes.length;
    }

    const statements: SqlStatement[] = [];
    for (const [partId, data] of changed) {
      const json = JSON.stringify(data);
      statements.push({ sql: 'UPDATE part SET data = ? WHERE id = ?', params: [json, partId] });
      statements.push({
        sql: `UPDATE event SET data = json_set(data, '$.part', json(?))
          WHERE type LIKE 'message.part.updated%' AND json_extract(data, '$.part.id') = ?`,
        params: [json, partId],
      });
    }
    await writeSqlite(db, statements, this.options.sqlite);
    result.parts = changed.size;
    this.log.info({ ...result, db }, 'attachments offloaded');
    return result;
  }

  private async store(id: string, bytes: Buffer, meta: OffloadedMeta): Promise<void> {
    await writeFile(join(this.attachmentsDir, id), bytes);
    await writeFile(join(this.attachmentsDir, `${id}.json`), JSON.stringify(meta));
  }

  /** Bytes and metadata of an offloaded item, or null when unknown. */
  async read(id: string): Promise<{ meta: OffloadedMeta; bytes: Buffer } | null> {
    if (!/^[A-Za-z0-9_-]{1,200}$/.test(id)) return null;
    try {
      const meta = JSON.parse(
        await readFile(join(this.attachmentsDir, `${id}.json`), 'utf8'),
      ) as OffloadedMeta;
      return { meta, bytes: await readFile(join(this.attachmentsDir, id)) };
    } catch {
      return null;
    }
  }
}
