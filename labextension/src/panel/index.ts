/**
 * JupyterLab plugin: a side panel with the %%hvd job of the current notebook's kernel.
 */
import { ILabShell, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';

import { JobPanel } from './widget';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-hvd:job-panel',
  description: 'Shows the %%hvd job of the current notebook, with Stop and Restart.',
  autoStart: true,
  requires: [ILabShell, INotebookTracker],
  activate: (_app: JupyterFrontEnd, labShell: ILabShell, notebooks: INotebookTracker): void => {
    const panel = new JobPanel();
    labShell.add(panel, 'left', { rank: 1000 });
    const follow = (): void => panel.setNotebook(notebooks.currentWidget);
    notebooks.currentChanged.connect(follow);
    follow();
  }
};

export default plugin;
