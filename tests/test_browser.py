"""The front end in a real browser: JupyterLab 4 and Notebook 7 run %%hvd cells and show the live monitor.

Drives Debian's Chromium (never a downloaded browser) with Playwright. Screenshots go to test-output/.
Skipped when Chromium is missing, unless JUPYTER_HVD_REQUIRE_BROWSER=1 (CI sets it).
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.timeout(420)

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "test-output"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-gpu", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
TOKEN = "hvd-browser-test"
RUN_S = 150_000  # ms a notebook may take to run all its cells here
STOP = "monitor_check.stop"  # the monitor notebook's cell ends once this file is in the server's folder
BACKGROUND_STOP = "background_check.stop"  # the same, for the cell run with --noblock
# Runs until the test has seen what it needs and creates the file {stop} (at least 1 s, at most 60 s).
MONITOR_CELL = """%%hvd -np 2 --framework none
import os
import time
import numpy as np
a, flag, began = np.random.rand(64, 64), np.zeros(1, np.float32), time.monotonic()
while True:
    a @ a
    hvd.monitor_step(32)
    ran = time.monotonic() - began
    flag[0] = (ran > 1 and os.path.exists({stop!r})) or ran > 60
    if hvd.allreduce(flag, name="done", op=hvd.Max)[0]:
        break
"""

FAILING_CELL = """%%hvd -np 2 --framework none
import time
import numpy as np
for i in range(40):
    hvd.monitor_step(8)
    hvd.allreduce(np.ones(4, np.float32), name=f"warm.{i}")
    time.sleep(0.02)
if hvd.rank() == 0:
    hvd.allreduce(np.ones(4, np.float32), name="late")  # waits for rank 1: a stall warning after 1 s
else:
    time.sleep(3)
    raise ValueError("rank 1 gives up")
"""
LIVE_CELL = """%%hvd -np 2 --framework none
import time
import numpy as np
import matplotlib.pyplot as plt
from tqdm.auto import tqdm

losses = []
for epoch, steps in ((1, 20), (2, 80)):
    for step in tqdm(range(steps), desc=f"epoch {epoch}", disable=hvd.rank() != 0):
        noise = hvd.allreduce(np.random.rand(4).astype(np.float32), name="noise")
        losses.append(float(np.exp(-len(losses) / 15) + 0.05 * noise.mean()))
        hvd.monitor_step(32)
        time.sleep(0.05)
    if epoch == 1:
        plt.figure(figsize=(5, 2.2))
        plt.plot(losses)
        plt.title(f"loss after epoch 1 (rank {hvd.rank()})")
        plt.show()
"""
TABLE_CELLS = [  # the table, besides the live cell's tqdm.auto bar and figure
    "%%hvd\nfrom IPython.display import display, Markdown\ndisplay(Markdown('**hello from rank %d**' % hvd.rank()))",
    "%%hvd\nfor i in range(3):\n    print('step', i, end='\\r', flush=True)\n    time.sleep(0.3)\nprint()",
    "%%hvd\nimport pandas as pd\npd.DataFrame({'a': [1, 2], 'b': [3, 4]})",
    "%%hvd\nfrom tqdm import tqdm as text_tqdm\nfor i in text_tqdm(range(5), desc='text'):\n    time.sleep(0.2)",
]
LIVE_SHOWN = """cell => {
    const bars = [...cell.querySelectorAll('.widget-hprogress')];
    const moving = bars.some(b => {
        const bar = b.querySelector('.progress-bar');
        const width = bar && parseFloat(bar.style.width || bar.style.height || '0');
        return width > 5 && width < 95;
    });
    return bars.length === 2 && moving && !!cell.querySelector('.jp-RenderedImage img');
}"""  # the cell shows rank 0's figure, its finished first bar and its second bar on the way
KERNEL_READY = """() => {
    const name = document.querySelector('.jp-KernelName')?.innerText.trim();
    const status = document.querySelector('.jp-Notebook-ExecutionIndicator')?.dataset.status;
    return !!name && name !== 'No Kernel' && status === 'idle' && !document.querySelector('.jp-Dialog');
}"""  # the toolbar names a kernel, it is idle, and no dialog is open
LIVE_RATES = """() => {
    const bars = [...document.querySelectorAll('.jhvd-monitor[data-state="running"] .jhvd-rate')];
    return bars.length === 2 && bars.every(b => Number(b.dataset.rate) > 0);
}"""
COUNT_UPDATES = """([ms, enough]) => new Promise(resolve => {
    let seen = 0;
    const done = () => { observer.disconnect(); resolve(seen); };
    const observer = new MutationObserver(records => {
        seen += records.filter(r => r.target.closest('.jhvd-monitor[data-state="running"]')).length;
        if (seen >= enough) done();
    });
    observer.observe(document.body, {attributes: true, subtree: true, attributeFilter: ['data-rate']});
    setTimeout(done, ms);
})"""  # data-rate writes on bars of a running monitor (one per bar and refresh), until `enough` or `ms` passed

if not os.path.exists(CHROMIUM):
    if os.environ.get("JUPYTER_HVD_REQUIRE_BROWSER") == "1":
        pytest.fail(f"Chromium not found at {CHROMIUM}: apt-get install chromium", pytrace=False)
    pytest.skip("Chromium not installed (apt-get install chromium)", allow_module_level=True)

sync_api = pytest.importorskip("playwright.sync_api")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A JupyterLab server over a folder with the quickstart notebook, a short monitor notebook and a failing one."""
    root = tmp_path_factory.mktemp("lab")
    shutil.copy(ROOT / "notebooks" / "01_quickstart.ipynb", root)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("%load_ext jupyter_hvd"),
                                         nbformat.v4.new_code_cell(MONITOR_CELL.format(stop=str(root / STOP))),
                                         nbformat.v4.new_code_cell("%hvd stop"),
                                         nbformat.v4.new_code_cell("%hvd monitor")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "monitor_check.ipynb")
    outputs = [nbformat.v4.new_code_cell(c) for c in ["%load_ext jupyter_hvd", LIVE_CELL, *TABLE_CELLS, "%hvd stop"]]
    nbformat.write(nbformat.v4.new_notebook(cells=outputs, metadata=nb.metadata), root / "outputs_check.ipynb")
    background = MONITOR_CELL.replace("--framework none", "--framework none --noblock", 1).replace(
        "while True:", "print('training in the background on rank', hvd.rank(), flush=True)\nwhile True:", 1)
    nb.cells = [nbformat.v4.new_code_cell(c) for c in ["%load_ext jupyter_hvd",
                                                       background.format(stop=str(root / BACKGROUND_STOP)),
                                                       "print('the notebook is free')"]]
    nbformat.write(nb, root / "background_check.ipynb")
    stall_env = 'import os\nos.environ["HOROVOD_STALL_CHECK_TIME_SECONDS"] = "1"\n%load_ext jupyter_hvd'
    nb.cells = [nbformat.v4.new_code_cell(stall_env), nbformat.v4.new_code_cell(FAILING_CELL)]
    nbformat.write(nb, root / "failure_check.ipynb")
    port = free_port()
    home = tmp_path_factory.mktemp("home")
    notification = home / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True)
    notification.write_text(json.dumps({"fetchNews": "false"}))  # no "news?" prompt over the screenshots
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
           "OMP_NUM_THREADS": "1", "MXNET_CPU_WORKER_NTHREADS": "1"}
    log = open(home / "server.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1", "--allow-root",
         f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}",
         f"--LabApp.workspaces_dir={home / 'workspaces'}", f"--LabApp.user_settings_dir={home / 'settings'}",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"JupyterLab did not start:\n{(home / 'server.log').read_text()[-3000:]}")
            time.sleep(0.5)
    with urllib.request.urlopen(f"{url}/lab/api/extensions?token={TOKEN}", timeout=10) as r:
        names = {e["name"] for e in json.load(r)}
    yield url, names, root
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


def open_notebook(page, url: str) -> None:
    """Open a notebook page and wait until its kernel runs and is idle, accepting a kernel choice if one is asked."""
    page.goto(url)
    page.locator(".jp-Notebook").wait_for(timeout=60_000)
    accept = page.locator(".jp-Dialog .jp-mod-accept")
    deadline = time.monotonic() + 90
    while not page.evaluate(KERNEL_READY):
        if accept.count():
            accept.first.click()
        if time.monotonic() > deadline:
            raise AssertionError(f"the notebook's kernel did not start:\n{page_report(page)}")
        time.sleep(0.25)


def run_all(page, menu_item: str = "Run All Cells") -> None:
    """Run every cell from the Run menu, and check that the first code cell was taken by the kernel."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text=menu_item).first.click()
    started = page.locator(".jp-CodeCell .jp-InputPrompt").first
    try:
        page.wait_for_function("p => !/\\[\\s*\\]/.test(p.textContent)", arg=started.element_handle(),
                               timeout=30_000)
    except sync_api.TimeoutError:
        save_screenshot(page, "run-all-timeout.png", full_page=True)
        raise AssertionError(f"Run All did not start the first cell:\n{page_report(page)}") from None


def page_report(page) -> str:
    """What a failing browser test saw: any dialog, the kernel status, and each code cell's prompt and output."""
    return page.evaluate("""() => {
        const lines = [...document.querySelectorAll('.jp-Dialog')].map(d => `dialog: ${d.innerText}`);
        const status = document.querySelector('.jp-Notebook-ExecutionIndicator');
        lines.push(`kernel: ${status ? status.dataset.status : 'no indicator'}`);
        for (const cell of document.querySelectorAll('.jp-CodeCell')) {
            const prompt = cell.querySelector('.jp-InputPrompt')?.textContent.trim();
            const source = cell.querySelector('.jp-InputArea-editor')?.innerText.split('\\n')[0];
            const output = cell.querySelector('.jp-OutputArea')?.innerText.trim().slice(-1500);
            lines.push(`${prompt} ${source}` + (output ? `\\n    ${output.replaceAll('\\n', '\\n    ')}` : ''));
        }
        return lines.join('\\n');
    }""")


def save_screenshot(target, name: str, **options) -> None:
    """A screenshot of a page or an element, kept under test-output/."""
    OUTPUT.mkdir(exist_ok=True)
    target.screenshot(path=str(OUTPUT / name), **options)


def wait_monitor(page, name: str, state: str = "finished"):
    """The first monitor on the page in this state; on a timeout, a screenshot and what the page shows go to the report."""
    monitor = page.locator(f'.jhvd-monitor[data-state="{state}"]').first
    try:
        monitor.wait_for(timeout=RUN_S)
    except sync_api.TimeoutError:
        save_screenshot(page, f"{name}-timeout.png", full_page=True)
        raise AssertionError(f"no {state} monitor within {RUN_S // 1000} s:\n{page_report(page)}") from None
    return monitor


def check_both_ranks_shown(page) -> None:
    """The last finished monitor shows a rate above 0 for ranks 0 and 1, and timeline spans for both."""
    monitor = page.locator('.jhvd-monitor[data-state="finished"]').last
    rates = {int(bar.get_attribute("data-rank")): float(bar.get_attribute("data-rate"))
             for bar in monitor.locator(".jhvd-rate").all()}
    assert sorted(rates) == [0, 1] and all(r > 0 for r in rates.values()), rates
    spans = [int(n) for n in monitor.locator("canvas.jhvd-timeline").get_attribute("data-spans").split(",")]
    assert len(spans) == 2 and all(n > 0 for n in spans), spans


def test_the_extension_is_installed_prebuilt(server):
    _, names, _ = server
    assert "jupyter-hvd" in names and "anywidget" in names, names


def test_quickstart_in_jupyterlab_shows_two_ranks_training(server, browser):
    url, _, _ = server
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    open_notebook(page, f"{url}/lab/workspaces/01-quickstart/tree/01_quickstart.ipynb?token={TOKEN}")
    run_all(page)
    monitor = wait_monitor(page, "quickstart-lab")
    assert monitor.get_attribute("data-ranks") == "2"
    check_both_ranks_shown(page)
    assert float(monitor.locator(".jhvd-rate-total").get_attribute("data-rate")) > 0
    with page.expect_download() as download:
        monitor.locator(".jhvd-save").click()
    trace = json.loads(Path(download.value.path()).read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["pid"] for e in spans} == {0, 1} and all(e["dur"] >= 0 for e in spans)
    monitor.scroll_into_view_if_needed()
    save_screenshot(monitor, "monitor.png")
    save_screenshot(page, "quickstart-lab.png")
    page.close()


def test_monitor_renders_in_notebook_7(server, browser):
    url, _, root = server
    (root / STOP).unlink(missing_ok=True)  # the cell runs until the refreshes are counted
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    open_notebook(page, f"{url}/notebooks/monitor_check.ipynb?token={TOKEN}")
    assert page.locator(".jhvd-job-panel").count() == 1  # the job panel is in Notebook 7's left area too
    run_all(page)
    page.wait_for_function(LIVE_RATES, timeout=RUN_S)  # while the cell runs, both ranks show a rate
    began = time.monotonic()
    updates = page.evaluate(COUNT_UPDATES, [3000, 3 * 3]) // 3  # three bars: ranks 0, 1 and the total
    print(f"\n{updates} throughput refreshes in {time.monotonic() - began:.1f} s while the cell ran")
    (root / STOP).touch()
    assert updates >= 3, f"only {updates} throughput refreshes in 3 s while the cell ran"
    wait_monitor(page, "monitor-notebook7")
    page.locator('.jhvd-monitor[data-state="finished"]').nth(1).wait_for(timeout=60_000)  # %hvd monitor
    check_both_ranks_shown(page)  # the reopened monitor: its timeline comes from the saved trait
    save_screenshot(page, "monitor-notebook7.png")
    page.close()


def test_the_monitor_of_a_background_cell_stays_live_while_the_notebook_is_idle(server, browser):
    url, _, root = server
    (root / BACKGROUND_STOP).unlink(missing_ok=True)
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    open_notebook(page, f"{url}/lab/workspaces/background-check/tree/background_check.ipynb?token={TOKEN}")
    run_all(page)
    page.locator(".jp-CodeCell").nth(2).locator(".jp-OutputArea-output", has_text="the notebook is free").wait_for(
        timeout=RUN_S)
    page.wait_for_function(LIVE_RATES, timeout=RUN_S)
    assert page.evaluate(KERNEL_READY), page_report(page)  # the kernel is idle: no cell waits for the ranks
    cell = page.locator(".jp-CodeCell").nth(1)
    for rank in (0, 1):  # the ranks' lines under the cell itself, while nothing waits for it
        cell.locator(".jp-OutputArea-output", has_text=f"[rank {rank}] training in the background on rank {rank}"
                     ).wait_for(timeout=30_000)
    assert "training in the background" not in page.locator(".jp-CodeCell").nth(2).inner_text(), page_report(page)
    updates = page.evaluate(COUNT_UPDATES, [3000, 3 * 3]) // 3
    print(f"\n{updates} throughput refreshes in 3 s with the kernel idle")
    assert updates >= 3, f"only {updates} throughput refreshes in 3 s while the cell ran in the background"
    assert page.evaluate(KERNEL_READY), page_report(page)
    save_screenshot(page, "background-monitor.png")
    (root / BACKGROUND_STOP).touch()
    wait_monitor(page, "background-monitor")  # it ends with the cell, though nothing waited for it
    cell.locator(".jp-OutputArea-output", has_text="finished on every rank in").wait_for(timeout=30_000)
    assert page.evaluate(KERNEL_READY), page_report(page)
    page.close()


def test_job_panel_lists_the_ranks_and_stops_and_restarts_them(server, browser):
    url, _, root = server
    (root / STOP).touch()  # the cell need not run for long here
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    open_notebook(page, f"{url}/lab/workspaces/monitor-check/tree/monitor_check.ipynb?token={TOKEN}")
    page.locator('li[data-id="jupyter-hvd-job-panel"]').click()
    panel = page.locator(".jhvd-job-panel")
    panel.wait_for(timeout=10_000)
    run_all(page)
    wait_monitor(page, "job-panel")
    page.locator('.jhvd-job-panel[data-state="stopped"]').wait_for(timeout=60_000)  # the last cell stops the job
    restart = panel.locator(".jhvd-job-restart")
    restart.click()
    page.locator('.jhvd-job-panel[data-state="idle"]').wait_for(timeout=90_000)
    rows = panel.locator('tr.jhvd-job-rank[data-alive="true"]')
    assert rows.count() == 2
    save_screenshot(page, "job-panel.png")
    panel.locator(".jhvd-job-stop").click()
    page.locator('.jhvd-job-panel[data-state="stopped"]').wait_for(timeout=60_000)
    assert panel.locator('tr.jhvd-job-rank[data-alive="true"]').count() == 0
    page.close()


def test_a_stall_and_a_failing_rank_show_in_the_monitor(server, browser):
    url, _, _ = server
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    open_notebook(page, f"{url}/lab/workspaces/failure-check/tree/failure_check.ipynb?token={TOKEN}")
    run_all(page)
    monitor = wait_monitor(page, "monitor-failed", state="failed")
    assert monitor.locator(".jhvd-failed").inner_text().startswith("Rank 1 failed: rank 1 raised ValueError")
    health = monitor.locator(".jhvd-health-entry")
    kinds = health.locator(".jhvd-health-kind").all_inner_texts()
    assert "stall" in kinds, kinds
    assert "late" in health.filter(has_text="stall").first.inner_text()
    save_screenshot(monitor, "monitor-failed.png")
    page.close()


def test_a_cell_shows_its_live_progress_bar_and_figure_under_the_monitor(server, browser):
    url, _, _ = server
    page = browser.new_page(viewport={"width": 1100, "height": 1400})
    open_notebook(page, f"{url}/lab/workspaces/outputs-check/tree/outputs_check.ipynb?token={TOKEN}")
    run_all(page)
    cell = page.locator(".jp-CodeCell").nth(1)
    try:
        page.wait_for_function(LIVE_SHOWN, arg=cell.element_handle(), timeout=RUN_S)
    except sync_api.TimeoutError:
        save_screenshot(page, "live-outputs-timeout.png", full_page=True)
        raise AssertionError(f"no live bar beside the figure:\n{page_report(page)}") from None
    cell.locator(".jhvd-monitor").wait_for(timeout=30_000)
    cell.scroll_into_view_if_needed()
    save_screenshot(cell, "live-outputs.png")
    kinds = cell.locator(".jp-OutputArea-child").evaluate_all(
        "children => children.map(c => c.querySelector('.jhvd-monitor') ? 'monitor' : c.innerText.slice(0, 6))")
    assert kinds.index("monitor") < kinds.index("[rank "), f"the monitor is above the ranks' outputs: {kinds}"
    wait_monitor(page, "live-outputs")
    page.locator(".jp-CodeCell").last.locator(".jp-OutputArea-output", has_text="stopped the ranks").wait_for(
        timeout=RUN_S)
    cells = page.locator(".jp-CodeCell")
    assert cells.nth(2).locator(".jp-RenderedMarkdown strong").all_inner_texts() == ["hello from rank 0"]
    lines = cells.nth(3).locator(".jp-OutputArea-output").all_inner_texts()
    assert sorted(line.strip() for line in lines) == ["[rank 0] step 2", "[rank 1] step 2"], lines
    assert cells.nth(4).locator(".jp-RenderedHTMLCommon table").count() == 1
    assert cells.nth(5).locator(".widget-hprogress").count() == 2  # a text tqdm: one bar per rank
    assert "model not found" not in page.locator(".jp-Notebook").inner_text()
    page.close()
