// The session's command palette (Ctrl+K or ⌘K): type to filter, arrows to choose, Enter to run. A
// command runs the page's own button (data-command), so it does what the button does and is
// unavailable whenever the button is disabled.
import { useEffect, useRef, useState } from 'react';

const COMMANDS = [
  { id: 'reload', label: 'Reload' },
  { id: 'stop', label: 'Stop session' },
  { id: 'abort', label: 'Abort turn' },
  // Asks the agent to reconcile the session branch with its base, then reloads once the turn ends.
  { id: 'sync', label: 'Sync Branch & Reload' },
];

function button(id: string): HTMLButtonElement | null {
  return document.querySelector<HTMLButtonElement>(`button[data-command="${id}"]`);
}

export function CommandPalette() {
  const dialog = useRef<HTMLDialogElement>(null);
  const [query, setQuery] = useState('');
  const [selected, setSelected] = useState(0);

  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (event.key.toLowerCase() === 'k' && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        setQuery('');
        setSelected(0);
        dialog.current?.showModal();
      }
    };
    addEventListener('keydown', onKey);
    return () => removeEventListener('keydown', onKey);
  }, []);

  const shown = COMMANDS.filter((c) => c.label.toLowerCase().includes(query.trim().toLowerCase()));
  const run = (id: string) => {
    const target = button(id);
    if (!target || target.disabled) return;
    dialog.current?.close();
    target.click();
  };

  return (
    <dialog ref={dialog} className="palette" aria-label="Commands">
      <input
        aria-label="Command"
        role="combobox"
        aria-expanded="true"
        aria-controls="palette-list"
        aria-activedescendant={shown[selected] ? `command-${shown[selected].id}` : undefined}
        placeholder="Type a command…"
        value={query}
        onChange={(e) => {
          setQuery(e.target.value);
          setSelected(0);
        }}
        onKeyDown={(e) => {
          if (e.key === 'ArrowDown') setSelected((i) => Math.min(i + 1, shown.length - 1));
          else if (e.key === 'ArrowUp') setSelected((i) => Math.max(i - 1, 0));
          else if (e.key === 'Enter' && shown[selected]) {
            e.preventDefault();
            run(shown[selected].id);
          }
        }}
      />
      <div id="palette-list" role="listbox" aria-label="Commands" className="options">
        {shown.map((c, i) => {
          const disabled = button(c.id)?.disabled ?? true;
          return (
            <div
              key={c.id}
              tabIndex={-1}
              id={`command-${c.id}`}
              role="option"
              aria-selected={i === selected}
              aria-disabled={disabled}
              onClick={() => run(c.id)}
              onKeyDown={(e) => {
                if (e.key === 'Enter') run(c.id);
              }}
            >
              {c.label}
              {disabled && ' (unavailable now)'}
            </div>
          );
        })}
      </div>
    </dialog>
  );
}
