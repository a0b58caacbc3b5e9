/**
 * The messages of the `jupyter_hvd.job` comm (kernel side: jupyter_hvd/magic/job_channel.py).
 */

/** The comm target the kernel registers when `%load_ext jupyter_hvd` runs. */
export const TARGET = 'jupyter_hvd.job';

export type JobState = 'none' | 'starting' | 'idle' | 'running' | 'failed' | 'stopped';

const STATES: readonly string[] = ['none', 'starting', 'idle', 'running', 'failed', 'stopped'];

export interface IRank {
  rank: number;
  host: string;
  pid: number;
  device: string;
  alive: boolean;
}

export interface IJob {
  state: JobState;
  np: number;
  framework: string;
  cells: number;
  error: string;
  failedRank: number | null;
  ranks: IRank[];
}

/** What the panel asks the kernel to do. */
export type Action = 'refresh' | 'stop' | 'restart';

/** A message from the kernel: the job, or why an action failed. */
export type KernelMessage = { type: 'job'; job: IJob } | { type: 'error'; message: string };

function record(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

function int(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}

function parseRank(value: unknown): IRank {
  const r = record(value);
  return { rank: int(r.rank), host: text(r.host), pid: int(r.pid), device: text(r.device), alive: r.alive === true };
}

/** Read a job dict as the kernel sends it, tolerating missing fields. */
export function parseJob(value: unknown): IJob {
  const j = record(value);
  const state = STATES.includes(text(j.state)) ? (j.state as JobState) : 'none';
  return {
    state,
    np: int(j.np),
    framework: text(j.framework),
    cells: int(j.cells),
    error: text(j.error),
    failedRank: typeof j.failed_rank === 'number' ? j.failed_rank : null,
    ranks: Array.isArray(j.ranks) ? j.ranks.map(parseRank) : []
  };
}

/** Read a comm message's data; null for anything that is not a job or error message. */
export function parseMessage(data: unknown): KernelMessage | null {
  const d = record(data);
  if (d.type === 'job') {
    return { type: 'job', job: parseJob(d.job) };
  }
  if (d.type === 'error') {
    return { type: 'error', message: text(d.message) || 'the kernel could not do that' };
  }
  return null;
}

/** Whether the job has something to stop: a start or cell in progress, or live ranks. */
export function canStop(job: IJob): boolean {
  return job.state === 'starting' || job.state === 'running' || job.ranks.some(r => r.alive);
}

/** Whether there is a job to restart (one was started in this kernel) and it is not starting now. */
export function canRestart(job: IJob): boolean {
  return job.np > 0 && job.state !== 'starting';
}
