/**
 * One kernel's end of the job comm: opens it when the kernel can answer, keeps the last job,
 * and sends the panel's actions.
 */
import { Kernel, KernelMessage } from '@jupyterlab/services';

import { Action, IJob, TARGET, parseMessage } from './protocol';

/**
 * Where the comm stands: `opening` (asked, no answer yet), `open`, `unloaded` (the kernel has no
 * `jupyter_hvd.job` target: the extension is not loaded), `restarting` (the kernel is restarting or
 * dead), `unavailable` (this kernel connection cannot open comms).
 */
export type CommStatus = 'opening' | 'open' | 'unloaded' | 'restarting' | 'unavailable';

/** Kernel states in which a comm cannot be opened, and any open comm is gone. */
const DOWN: readonly Kernel.Status[] = ['restarting', 'autorestarting', 'dead', 'terminating'];

export class JobConnection {
  status: CommStatus = 'opening';
  job: IJob | null = null;
  /** The action sent and not yet handled by the kernel. */
  pending: Action | null = null;
  /** The kernel's answer to the last action when it could not do it. */
  error = '';

  constructor(
    readonly kernel: Kernel.IKernelConnection,
    private readonly changed: () => void
  ) {
    kernel.statusChanged.connect(this._onStatus, this);
    kernel.anyMessage.connect(this._onAnyMessage, this);
    if (DOWN.includes(kernel.status)) {
      this.status = 'restarting';
      this._openWhenIdle = true;
    } else {
      this._open();
    }
  }

  /** Stop listening and forget the comm (the kernel keeps its end until it closes). */
  dispose(): void {
    this.kernel.statusChanged.disconnect(this._onStatus, this);
    this.kernel.anyMessage.disconnect(this._onAnyMessage, this);
    this._comm = null;
  }

  /**
   * Ask the kernel to refresh, stop or restart the job. Comm messages wait while the kernel is busy,
   * so for stop and restart a busy kernel is interrupted first: that stops the running %%hvd cell
   * on all ranks, then the kernel handles the request.
   */
  async act(action: Action): Promise<void> {
    const comm = this._comm;
    if (comm === null || comm.isDisposed) {
      return;
    }
    this.pending = action;
    this.error = '';
    this.changed();
    try {
      if (action !== 'refresh' && this.kernel.status === 'busy') {
        await this.kernel.interrupt();
      }
      await comm.send({ action }).done;
    } catch (reason) {
      this.error = `${action} failed: ${reason instanceof Error ? reason.message : String(reason)}`;
    } finally {
      if (this.pending === action) {
        this.pending = null;
      }
      this.changed();
    }
  }

  private _open(): void {
    this._openWhenIdle = false;
    let comm: Kernel.IComm;
    try {
      comm = this.kernel.createComm(TARGET);
    } catch (reason) {
      this.status = 'unavailable';
      this.changed();
      return;
    }
    let answered = false;
    this._comm = comm;
    this.status = 'opening';
    comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
      if (this._comm !== comm) {
        return;
      }
      answered = true;
      this.status = 'open';
      const message = parseMessage(msg.content.data);
      if (message?.type === 'job') {
        this.job = message.job;
      } else if (message?.type === 'error') {
        this.error = message.message;
      }
      this.changed();
    };
    comm.onClose = () => {
      if (this._comm !== comm) {
        return;
      }
      // The kernel closes a comm to a target it does not have: the extension is not loaded.
      this._comm = null;
      this.status = answered ? 'opening' : 'unloaded';
      this._openWhenIdle = answered;
      this.changed();
    };
    this.changed();
    try {
      comm.open();
    } catch (reason) {
      this._comm = null;
      this.status = 'unavailable';
      this.changed();
    }
  }

  private _onStatus(_kernel: Kernel.IKernelConnection, status: Kernel.Status): void {
    if (DOWN.includes(status)) {
      // The kernel's comms end with it; open a new one once the new kernel is idle.
      this._comm = null;
      this._running.clear();
      this.job = null;
      this.pending = null;
      this.status = 'restarting';
      this._openWhenIdle = true;
      this.changed();
    } else if (status === 'idle' && this._openWhenIdle && this._comm === null) {
      this._open();
    }
  }

  /** After a cell that mentions hvd ran (it may have loaded the extension), try again to open the comm. */
  private _onAnyMessage(_kernel: Kernel.IKernelConnection, args: Kernel.IAnyMessageArgs): void {
    if (this._comm !== null) {
      return;
    }
    const { msg, direction } = args;
    if (direction === 'send' && msg.header.msg_type === 'execute_request') {
      const code = (msg.content as { code?: unknown }).code;
      if (typeof code === 'string' && code.includes('hvd')) {
        this._running.add(msg.header.msg_id);
      }
    } else if (direction === 'recv' && msg.header.msg_type === 'status') {
      const parent = (msg.parent_header as Partial<KernelMessage.IHeader>).msg_id;
      const state = (msg.content as { execution_state?: unknown }).execution_state;
      if (state === 'idle' && parent !== undefined && this._running.delete(parent)) {
        this._open();
      }
    }
  }

  private _comm: Kernel.IComm | null = null;
  private _openWhenIdle = false;
  private readonly _running = new Set<string>(); // execute requests that may load the extension
}
