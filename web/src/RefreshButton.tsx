// The "Refresh" button of a section that reads on demand (Changes, Logs): disabled while a read is
// in flight, and the next read skips urql's cache.
export function RefreshButton({
  fetching,
  refetch,
  busyLabel = 'Refresh',
}: {
  fetching: boolean;
  refetch: (opts: { requestPolicy: 'network-only' }) => void;
  /** What the button says while reading. */
  busyLabel?: string;
}) {
  return (
    <button
      type="button"
      className="secondary"
      disabled={fetching}
      onClick={() => refetch({ requestPolicy: 'network-only' })}
    >
      {fetching ? busyLabel : 'Refresh'}
    </button>
  );
}
