/**
 * The pod's live statistics as rates: two polls of `GET /live/stats` in, one interval's figures out.
 *
 * `/live/stats` reports cumulative counters (gpt-live §11); the page shows what happened between
 * two polls: ticks run, busy time per tick against the frame budget, ticks that ran late.
 * Pure: the page's poller passes both snapshots in.
 */

/**
 * @param {object|null} prev the previous snapshot, or null for the first poll
 * @param {object} cur the latest snapshot
 * @returns {{sessions: number, maxSessions: number, frameMs: number, ticks: number,
 *   tickMs: number|null, lastTickMs: number, lateTicks: number}}
 */
export function interval(prev, cur) {
  // A restarted pod resets its counters: treat a decrease as a fresh start.
  const fresh = prev === null || cur.ticks < prev.ticks || cur.tick_busy_us < prev.tick_busy_us;
  const ticks = fresh ? 0 : cur.ticks - prev.ticks;
  const busyUs = fresh ? 0 : cur.tick_busy_us - prev.tick_busy_us;
  const late = fresh ? 0 : Math.max(0, cur.late_ticks - prev.late_ticks);
  return {
    sessions: cur.sessions,
    maxSessions: cur.max_sessions,
    frameMs: cur.frame_ms,
    ticks,
    tickMs: ticks > 0 ? busyUs / ticks / 1000 : null,
    lastTickMs: cur.last_tick_us / 1000,
    lateTicks: late,
  };
}
