// The OpenCode events the sessionEvents bench reports (bench/session-events.ts and its reporter
// process, bench/support/events-reporter.ts).

/** A text delta as OpenCode emits it, numbered so the stream's order can be followed. */
export function deltaEvent(i: number): string {
  return JSON.stringify({
    type: 'message.part.delta',
    properties: {
      sessionID: 'ses_bench',
      messageID: 'msg_bench',
      partID: 'prt_bench',
      field: 'text',
      delta: `w${i} `,
    },
  });
}
