/**
 * Waits for a condition no event announces (another process's state over IPC, a counter fed by
 * several sources), checking it every few milliseconds, bounded. Prefer waiting for an event or
 * a state (test/support/wire.ts `next`, `untilState`) where there is one.
 *
 * @throws {Error} (rejects) after `timeoutMs`, naming `what`.
 */
export async function until(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}
