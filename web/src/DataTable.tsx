// The dashboard's one table: a scrollable, focusable region (a keyboard can scroll it sideways on a
// narrow screen) around a plain <table>. With `virtual`, only the rows in view (plus a few either
// side) are in the DOM: two spacer rows stand for the rest, so the scrollbar, the column widths and
// the table's semantics (aria-rowcount, aria-rowindex) stay those of the whole list.
import { type ReactNode, useEffect, useLayoutEffect, useRef, useState } from 'react';

/** Rows rendered beyond each edge of the view, so a fast scroll shows no blank band. */
const OVERSCAN_ROWS = 8;

export interface VirtualOptions {
  /** Every row's height: cells do not wrap, so one line fits. */
  rowHeightPx: number;
  /** Called when the view reaches the last rows, to load the next page. */
  onNearEnd?(): void;
}

export interface DataTableProps<T> {
  /** Accessible name of the scrollable region. */
  label: string;
  columns: readonly string[];
  rows: readonly T[];
  rowKey(row: T): string;
  /** The row's <td>s. */
  cells(row: T): ReactNode;
  /** Attributes of the row's <tr> (data-* for tests and styling). */
  rowProps?(row: T): Record<string, string | boolean | undefined>;
  virtual?: VirtualOptions;
  /** Shown under the table when there are no rows. */
  empty?: ReactNode;
  testId?: string;
}

export function DataTable<T>({
  label,
  columns,
  rows,
  rowKey,
  cells,
  rowProps,
  virtual,
  empty,
  testId,
}: DataTableProps<T>) {
  const region = useRef<HTMLElement>(null);
  const [view, setView] = useState({ top: 0, height: 0 });

  useLayoutEffect(() => {
    const el = region.current;
    if (!virtual || !el) return;
    const update = () => setView({ top: el.scrollTop, height: el.clientHeight });
    update();
    el.addEventListener('scroll', update, { passive: true });
    const resized = new ResizeObserver(update);
    resized.observe(el);
    return () => {
      el.removeEventListener('scroll', update);
      resized.disconnect();
    };
  }, [virtual]);

  let start = 0;
  let end = rows.length;
  if (virtual) {
    const h = virtual.rowHeightPx;
    start = Math.max(0, Math.floor(view.top / h) - OVERSCAN_ROWS);
    end = Math.min(rows.length, Math.ceil((view.top + (view.height || 20 * h)) / h) + OVERSCAN_ROWS);
  }
  const nearEnd = virtual?.onNearEnd !== undefined && end >= rows.length - OVERSCAN_ROWS;
  const onNearEnd = virtual?.onNearEnd;
  const count = rows.length;
  // Also when rows arrive while the view stays at the end (a filter that hides most of a page).
  useEffect(() => {
    if (nearEnd && count >= 0) onNearEnd?.();
  }, [nearEnd, onNearEnd, count]);

  const span = columns.length;
  return (
    <section
      ref={region}
      className={virtual ? 'table-wrap virtual' : 'table-wrap'}
      aria-label={label}
      // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must take focus
      tabIndex={0}
      data-testid={testId}
    >
      <table className="sessions" aria-rowcount={virtual ? rows.length + 1 : undefined}>
        <thead>
          <tr aria-rowindex={virtual ? 1 : undefined}>
            {columns.map((c) => (
              <th key={c} scope="col">
                {c}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {virtual && start > 0 && <Spacer heightPx={start * virtual.rowHeightPx} span={span} />}
          {rows.slice(start, end).map((row, i) => (
            <tr
              key={rowKey(row)}
              {...rowProps?.(row)}
              aria-rowindex={virtual ? start + i + 2 : undefined}
              style={virtual ? { height: virtual.rowHeightPx } : undefined}
            >
              {cells(row)}
            </tr>
          ))}
          {virtual && end < rows.length && (
            <Spacer heightPx={(rows.length - end) * virtual.rowHeightPx} span={span} />
          )}
        </tbody>
      </table>
      {rows.length === 0 && empty}
    </section>
  );
}

/** Stands for rows not rendered: holds their height, hidden from assistive technology. */
function Spacer({ heightPx, span }: { heightPx: number; span: number }) {
  return (
    // biome-ignore lint/a11y/noAriaHiddenOnFocusable: an empty row, nothing in it takes focus
    <tr aria-hidden="true" className="spacer" style={{ height: heightPx }}>
      <td colSpan={span} />
    </tr>
  );
}
