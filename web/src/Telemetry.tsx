// A sandbox's telemetry, live: the last samples from `Sandbox.telemetry`, then every new one from the
// `telemetry` subscription, drawn with uPlot (loaded on first use: it stays out of the first bundle).
// The numbers are also written out, for screen readers and narrow screens.
import { useEffect, useMemo, useRef, useState } from 'react';
import type uPlot from 'uplot';
import { useQuery, useSubscription } from 'urql';
import { Problem, problemFromError } from './errors';
import {
  type TelemetryFieldsFragment,
  SandboxTelemetryDocument,
  TelemetryDocument,
} from './generated/graphql';

const MIB = 1024 * 1024;
const KEEP = 300;

function mib(bytes: number): string {
  return `${Math.round(bytes / MIB)} MiB`;
}

export function Telemetry({ sandboxId }: { sandboxId: string }) {
  const [history] = useQuery({ query: SandboxTelemetryDocument, variables: { id: sandboxId } });
  const [live] = useSubscription(
    { query: TelemetryDocument, variables: { sandboxId } },
    (all: TelemetryFieldsFragment[] = [], data) => [...all.slice(-KEEP), data.telemetry],
  );
  const samples = useMemo(() => {
    const byTime = new Map<string, TelemetryFieldsFragment>();
    for (const edge of history.data?.sandbox?.telemetry.edges ?? []) byTime.set(edge.node.at, edge.node);
    for (const sample of live.data ?? []) byTime.set(sample.at, sample);
    return [...byTime.values()].sort((a, b) => a.at.localeCompare(b.at)).slice(-KEEP);
  }, [history.data, live.data]);
  const latest = samples.at(-1);
  const local = history.data?.sandbox?.memoryLimitEnforced === false;

  return (
    <section
      className="card"
      aria-labelledby="telemetry-title"
      data-testid="telemetry"
      data-samples={samples.length}
    >
      <h2 id="telemetry-title">Telemetry</h2>
      {history.error && <Problem problem={problemFromError(history.error)} />}
      {live.error && <Problem problem={problemFromError(live.error)} />}
      {local && (
        <p className="warning" data-testid="limits-not-enforced">
          Limits are not enforced on LOCAL: the sandbox is a process on this host with no memory, CPU or disk
          cap, so the memory “limit” below is the host’s memory. Use Daytona, E2B or Platinum for enforced
          limits.
        </p>
      )}
      {latest ? (
        <dl className="facts">
          <div>
            <dt>Memory</dt>
            <dd>
              {mib(latest.memoryUsedBytes)} of {mib(latest.memoryLimitBytes)}
              {local && ' (host)'}
            </dd>
          </div>
          <div>
            <dt>Load (1 min)</dt>
            <dd>{latest.load1.toFixed(2)}</dd>
          </div>
          <div>
            <dt>Disk</dt>
            <dd>
              {mib(latest.diskUsedBytes)} of {mib(latest.diskTotalBytes)}
            </dd>
          </div>
          <div>
            <dt>Daemon RSS</dt>
            <dd>{mib(latest.daemonRssBytes)}</dd>
          </div>
          <div>
            <dt>OpenCode RSS</dt>
            <dd>{mib(latest.opencodeRssBytes)}</dd>
          </div>
        </dl>
      ) : (
        <p>No samples yet: the sandbox reports one a minute.</p>
      )}
      {samples.length > 1 && <Chart samples={samples} />}
    </section>
  );
}

function Chart({ samples }: { samples: TelemetryFieldsFragment[] }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const [failed, setFailed] = useState<string | null>(null);
  const data = useMemo(
    () =>
      [
        samples.map((s) => Date.parse(s.at) / 1000),
        samples.map((s) => s.memoryUsedBytes / MIB),
        samples.map((s) => s.memoryLimitBytes / MIB),
        samples.map((s) => s.daemonRssBytes / MIB),
        samples.map((s) => s.opencodeRssBytes / MIB),
        samples.map((s) => s.load1),
      ] as uPlot.AlignedData,
    [samples],
  );

  useEffect(() => {
    if (plot.current) {
      plot.current.setData(data);
      return;
    }
    let cancelled = false;
    Promise.all([import('uplot'), import('uplot/dist/uPlot.min.css')])
      .then(([{ default: UPlot }]) => {
        if (cancelled || !box.current || plot.current) return;
        plot.current = new UPlot(
          {
            width: Math.max(280, box.current.clientWidth),
            height: 220,
            scales: { load: { auto: true } },
            axes: [
              {},
              { label: 'MiB', size: 60 },
              { scale: 'load', side: 1, label: 'load', grid: { show: false } },
            ],
            series: [
              {},
              { label: 'memory used', stroke: '#0b5cad', width: 2 },
              { label: 'memory limit', stroke: '#b42318', dash: [6, 4] },
              { label: 'daemon RSS', stroke: '#1a7f37' },
              { label: 'OpenCode RSS', stroke: '#8250df' },
              { label: 'load', stroke: '#8a5a00', scale: 'load' },
            ],
          },
          data,
          box.current,
        );
      })
      .catch((error: Error) => setFailed(error.message));
    return () => {
      cancelled = true;
    };
  }, [data]);

  useEffect(
    () => () => {
      plot.current?.destroy();
      plot.current = null;
    },
    [],
  );

  return (
    <>
      <div ref={box} className="chart" aria-hidden="true" />
      {failed && <p className="problem">The chart could not load: {failed}</p>}
    </>
  );
}
