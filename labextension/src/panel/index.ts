/**
 * JupyterLab plugin: a side panel with the %%hvd job of the current notebook's kernel.
 * It goes in the shell's left area, which JupyterLab and Notebook 7 both have.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';

import { JobPanel } from './widget';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-hvd:job-panel',
  description: 'Shows the %%hvd job of the current notebook, with Stop and Restart.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, notebooks: INotebookTracker): void => {
    const panel = new JobPanel();
    app.shell.add(panel, 'left', { rank: 1000 });
    const follow = (): void => panel.setNotebook(notebooks.currentWidget);
    notebooks.currentChanged.connect(follow);
    follow();
  }
};

export default plugin;
