// A destructive action behind a second, explicit step: the first button asks, the question names
// what is about to happen, and focus moves to Cancel so Enter never confirms by accident.
import { useEffect, useRef, useState } from 'react';

export function ConfirmButton({
  label,
  question,
  confirmLabel,
  disabled,
  onConfirm,
}: {
  label: string;
  question: string;
  confirmLabel: string;
  disabled?: boolean;
  onConfirm(): void;
}) {
  const [asking, setAsking] = useState(false);
  const cancel = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (asking) cancel.current?.focus();
  }, [asking]);

  if (!asking) {
    return (
      <button type="button" className="danger" disabled={disabled} onClick={() => setAsking(true)}>
        {label}
      </button>
    );
  }
  return (
    <span className="confirm">
      <span>{question}</span>{' '}
      <button
        type="button"
        className="danger"
        onClick={() => {
          setAsking(false);
          onConfirm();
        }}
      >
        {confirmLabel}
      </button>{' '}
      <button type="button" className="secondary" ref={cancel} onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  );
}
