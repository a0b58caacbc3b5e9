/**
 * The side panel: the %%hvd job of the current notebook's kernel, its ranks, and Stop / Restart.
 */
import { NotebookPanel } from '@jupyterlab/notebook';
import { Kernel } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

import { JobConnection } from './connection';
import { Action, IJob, canRestart, canStop } from './protocol';

type SessionContext = NotebookPanel['sessionContext'];

const STOP_TIP =
  'Stop the ranks of this job. If a cell is running, the kernel is interrupted first ' +
  '(which stops the %%hvd cell on all ranks), then the ranks are stopped: same as %hvd stop.';
const RESTART_TIP =
  'Start new ranks for this job. If a cell is running, the kernel is interrupted first ' +
  '(which stops the %%hvd cell on all ranks), then the ranks are restarted: same as %hvd restart.';
const UNLOADED =
  'No %%hvd job here yet: load the extension with %load_ext jupyter_hvd, or run a %%hvd cell.';

export class JobPanel extends Widget {
  constructor() {
    super();
    this.id = 'jupyter-hvd-job-panel';
    this.addClass('jhvd-job-panel');
    this.title.caption = 'hvd: the %%hvd job of the current notebook';
    this.title.iconClass = 'jhvd-job-icon'; // draws "hvd"; a label too would show it twice in the side bar
    this._render();
  }

  /** Follow this notebook's kernel (null: no notebook). */
  setNotebook(notebook: NotebookPanel | null): void {
    const context = notebook?.sessionContext ?? null;
    if (context === this._context) {
      return;
    }
    this._context?.kernelChanged.disconnect(this._onKernelChanged, this);
    this._context = context;
    this._notebookName = notebook?.title.label ?? '';
    context?.kernelChanged.connect(this._onKernelChanged, this);
    this._follow(context?.session?.kernel ?? null);
  }

  dispose(): void {
    this._connection?.dispose();
    this._connection = null;
    super.dispose();
  }

  private _onKernelChanged(context: SessionContext): void {
    this._follow(context.session?.kernel ?? null);
  }

  private _follow(kernel: Kernel.IKernelConnection | null): void {
    if (kernel === this._connection?.kernel) {
      return;
    }
    this._connection?.dispose();
    this._connection = kernel === null ? null : new JobConnection(kernel, () => this._render());
    this._render();
  }

  private _act(action: Action): void {
    void this._connection?.act(action);
  }

  /** Redraw the whole panel from the connection's state (it is small). */
  private _render(): void {
    const node = this.node;
    node.replaceChildren();
    const connection = this._connection;
    const job = connection?.status === 'open' ? connection.job : null;
    node.dataset.state = job?.state ?? 'unavailable';
    node.dataset.comm = connection?.status ?? 'no-kernel';

    const header = add(node, 'div', 'jhvd-job-header');
    add(header, 'span', 'jhvd-job-title', 'hvd job');
    if (job !== null) {
      const badge = add(header, 'span', 'jhvd-job-badge', connection?.pending ? `${connection.pending}…` : job.state);
      badge.dataset.state = job.state;
    }
    if (this._notebookName) {
      add(node, 'div', 'jhvd-job-notebook', this._notebookName);
    }

    if (connection === null) {
      add(node, 'div', 'jhvd-job-note', this._context ? 'The notebook has no kernel.' : 'Open a notebook to see its %%hvd job.');
    } else if (connection.status === 'unloaded') {
      add(node, 'div', 'jhvd-job-note', UNLOADED);
    } else if (connection.status === 'restarting') {
      add(node, 'div', 'jhvd-job-note', 'The kernel is restarting.');
    } else if (connection.status === 'unavailable') {
      add(node, 'div', 'jhvd-job-note', 'This kernel connection cannot open comms.');
    } else if (job === null) {
      add(node, 'div', 'jhvd-job-note', 'Connecting to the kernel…');
    } else {
      this._renderJob(node, job);
    }
    if (connection?.error) {
      add(node, 'div', 'jhvd-job-action-error', connection.error);
    }

    const buttons = add(node, 'div', 'jhvd-job-buttons');
    const busy = connection?.pending != null;
    button(buttons, 'Stop', 'jhvd-job-stop', STOP_TIP, job !== null && !busy && canStop(job), () => this._act('stop'));
    button(buttons, 'Restart', 'jhvd-job-restart', RESTART_TIP, job !== null && !busy && canRestart(job), () =>
      this._act('restart')
    );
  }

  private _renderJob(node: HTMLElement, job: IJob): void {
    if (job.state === 'none') {
      add(node, 'div', 'jhvd-job-note', 'No ranks started yet: run a %%hvd -np N cell.');
      return;
    }
    const parts = [`${job.np} rank${job.np === 1 ? '' : 's'}`];
    if (job.framework) {
      parts.push(`API ${job.framework}`);
    }
    parts.push(`${job.cells} cell${job.cells === 1 ? '' : 's'} run`);
    add(node, 'div', 'jhvd-job-summary', parts.join(' · '));
    if (job.error) {
      const error = add(node, 'div', 'jhvd-job-error', job.error);
      error.title = job.error;
    }
    if (job.ranks.length === 0) {
      return;
    }
    const table = add(node, 'table', 'jhvd-job-ranks');
    const head = add(add(table, 'thead'), 'tr');
    for (const name of ['rank', 'host', 'pid', 'device', 'alive']) {
      add(head, 'th', '', name);
    }
    const body = add(table, 'tbody');
    for (const rank of job.ranks) {
      const row = add(body, 'tr', 'jhvd-job-rank');
      row.dataset.alive = String(rank.alive);
      if (rank.rank === job.failedRank) {
        row.classList.add('jhvd-job-rank-failed');
      }
      add(row, 'td', '', String(rank.rank));
      add(row, 'td', '', rank.host);
      add(row, 'td', '', String(rank.pid));
      add(row, 'td', '', rank.device);
      add(row, 'td', rank.alive ? 'jhvd-job-alive' : 'jhvd-job-dead', rank.alive ? 'yes' : 'no');
    }
  }

  private _context: SessionContext | null = null;
  private _notebookName = '';
  private _connection: JobConnection | null = null;
}

function add<K extends keyof HTMLElementTagNameMap>(
  parent: HTMLElement,
  tag: K,
  className = '',
  text = ''
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  if (className) {
    element.className = className;
  }
  if (text) {
    element.textContent = text;
  }
  parent.appendChild(element);
  return element;
}

function button(
  parent: HTMLElement,
  label: string,
  className: string,
  tip: string,
  enabled: boolean,
  onClick: () => void
): HTMLButtonElement {
  const element = add(parent, 'button', `jp-mod-styled jhvd-job-button ${className}`, label);
  element.title = tip;
  element.disabled = !enabled;
  element.addEventListener('click', onClick);
  return element;
}
