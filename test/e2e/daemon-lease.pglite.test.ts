// The daemon, its lease and the idle reaper end to end, on the embedded PGlite (see daemon-lease.ts).
import { describeDaemonLease } from './daemon-lease';

describeDaemonLease('pglite');
