/**
 * The tick-time sparkline: recent per-second mean tick times against the 80 ms frame budget.
 *
 * A log scale from 10 µs to twice the budget, because a healthy pod ticks in microseconds to a few
 * milliseconds while the budget is 80 ms: on a linear axis the line would lie flat on the floor.
 * Gridlines at each decade and a dashed budget line make the scale readable at a glance.
 */

const FLOOR_MS = 0.01;

/**
 * Draw `values` (ms, oldest first; null for an interval without ticks) on `canvas`.
 * @param {HTMLCanvasElement} canvas
 * @param {(number|null)[]} values
 * @param {number} budgetMs
 * @param {number} slots how many values fit across
 */
export function draw(canvas, values, budgetMs, slots) {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth;
  const height = canvas.clientHeight;
  if (canvas.width !== Math.round(width * ratio)) canvas.width = Math.round(width * ratio);
  if (canvas.height !== Math.round(height * ratio)) canvas.height = Math.round(height * ratio);
  const ctx = canvas.getContext('2d');
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);

  const style = getComputedStyle(canvas);
  const top = Math.log10(2 * budgetMs);
  const bottom = Math.log10(FLOOR_MS);
  const pad = 4;
  const y = (ms) => {
    const v = Math.log10(Math.max(FLOOR_MS, ms));
    return pad + (1 - (v - bottom) / (top - bottom)) * (height - 2 * pad);
  };

  ctx.font = `10px ${style.fontFamily}`;
  ctx.lineWidth = 1;
  ctx.strokeStyle = style.getPropertyValue('--grid').trim();
  ctx.fillStyle = style.getPropertyValue('--muted').trim();
  for (const ms of [0.1, 1, 10]) {
    const gy = Math.round(y(ms)) + 0.5;
    ctx.beginPath();
    ctx.moveTo(0, gy);
    ctx.lineTo(width, gy);
    ctx.stroke();
    ctx.fillText(ms >= 1 ? `${ms} ms` : `${ms * 1000} µs`, 2, gy - 2);
  }

  const by = Math.round(y(budgetMs)) + 0.5;
  ctx.strokeStyle = style.getPropertyValue('--bad').trim();
  ctx.setLineDash([4, 3]);
  ctx.beginPath();
  ctx.moveTo(0, by);
  ctx.lineTo(width, by);
  ctx.stroke();
  ctx.setLineDash([]);
  ctx.fillStyle = style.getPropertyValue('--bad').trim();
  ctx.fillText(`${budgetMs} ms budget`, 2, by - 2);

  const dx = width / Math.max(1, slots - 1);
  const x0 = width - dx * (values.length - 1);
  ctx.strokeStyle = style.getPropertyValue('--accent').trim();
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  let pen = false;
  values.forEach((ms, i) => {
    if (ms === null) {
      pen = false;
      return;
    }
    const px = x0 + i * dx;
    if (pen) ctx.lineTo(px, y(ms));
    else ctx.moveTo(px, y(ms));
    pen = true;
  });
  ctx.stroke();
}
