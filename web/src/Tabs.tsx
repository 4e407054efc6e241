// Tabs as WAI-ARIA lays them out: arrow keys move between tabs, one panel shows at a time. A panel
// mounts the first time its tab is chosen and stays mounted (hidden) after, so a terminal or a
// preview keeps its state while another tab is looked at, and nothing unopened costs a request.
import { type ReactNode, useRef, useState } from 'react';

export interface Tab {
  id: string;
  label: string;
  render(): ReactNode;
}

export function Tabs({ label, tabs, initial }: { label: string; tabs: Tab[]; initial?: string }) {
  const [current, setCurrent] = useState(initial ?? tabs[0]?.id ?? '');
  const [opened, setOpened] = useState(() => new Set([current]));
  const buttons = useRef(new Map<string, HTMLButtonElement>());

  function choose(id: string, focus = false) {
    setCurrent(id);
    setOpened((all) => (all.has(id) ? all : new Set([...all, id])));
    if (focus) buttons.current.get(id)?.focus();
  }

  function onKeyDown(event: { key: string; preventDefault(): void }) {
    const at = tabs.findIndex((t) => t.id === current);
    const next =
      event.key === 'ArrowRight'
        ? (at + 1) % tabs.length
        : event.key === 'ArrowLeft'
          ? (at - 1 + tabs.length) % tabs.length
          : event.key === 'Home'
            ? 0
            : event.key === 'End'
              ? tabs.length - 1
              : null;
    if (next === null) return;
    event.preventDefault();
    choose(tabs[next]!.id, true);
  }

  return (
    <div className="tabs">
      <div role="tablist" aria-label={label} className="tablist" onKeyDown={onKeyDown}>
        {tabs.map((t) => (
          <button
            key={t.id}
            type="button"
            role="tab"
            id={`tab-${t.id}`}
            aria-selected={t.id === current}
            aria-controls={`panel-${t.id}`}
            tabIndex={t.id === current ? 0 : -1}
            ref={(el) => {
              if (el) buttons.current.set(t.id, el);
              else buttons.current.delete(t.id);
            }}
            onClick={() => choose(t.id)}
          >
            {t.label}
          </button>
        ))}
      </div>
      {tabs.map((t) =>
        opened.has(t.id) ? (
          <div
            key={t.id}
            role="tabpanel"
            id={`panel-${t.id}`}
            aria-labelledby={`tab-${t.id}`}
            hidden={t.id !== current}
            className="tabpanel"
          >
            {t.render()}
          </div>
        ) : null,
      )}
    </div>
  );
}
