// What a child process of a test wrote to stdout and stderr, as one growing text (for the error a
// failed start throws, and a test's look at the logs).
import type { ChildProcess } from 'node:child_process';

export function collectOutput(child: ChildProcess): () => string {
  let output = '';
  const append = (chunk: Buffer) => {
    output += chunk.toString();
  };
  child.stdout?.on('data', append);
  child.stderr?.on('data', append);
  return () => output;
}
