// A secret the API returns once (a token, a webhook signing key): shown until the next attempt, with
// the reminder that it cannot be read back.
export function ShownOnce({ what, value, testId }: { what: string; value: string | null; testId: string }) {
  if (!value) return null;
  return (
    <div className="secret" role="status">
      <p>Copy {what} now: it is shown once and never again.</p>
      <output className="mono" data-testid={testId}>
        {value}
      </output>
    </div>
  );
}
