"""The MLflow side of MLFlowLoggerTest: waits for a tracking server, and reads a run back with MLflow's own client.

usage: mlflow_read.py wait URL
       mlflow_read.py read URL EXPERIMENT RUN_NAME_TAG DOWNLOAD_DIR

`read` prints one JSON line: the experiment's runs tagged run_name=RUN_NAME_TAG, each with its status, name, params,
tags, the history of every metric (step, value), and its artifacts (path, size, and the sha256 of each downloaded
file).
"""
import hashlib
import json
import sys
import time
import urllib.request


def wait(url):
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    print("ready")
                    return
        except OSError:
            pass
        time.sleep(0.5)
    sys.exit(f"no MLflow server at {url} after 120 s")


def artifacts(client, run_id, path, out):
    for f in client.list_artifacts(run_id, path):
        if f.is_dir:
            artifacts(client, run_id, f.path, out)
        else:
            local = client.download_artifacts(run_id, f.path, sys.argv[5])
            with open(local, "rb") as fh:
                out.append({"path": f.path, "size": f.file_size, "sha256": hashlib.sha256(fh.read()).hexdigest()})


def read(url, experiment, run_name):
    from mlflow import MlflowClient

    client = MlflowClient(url)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], filter_string=f'tags.run_name = "{run_name}"')
    out = []
    for run in runs:
        metrics = {k: [[m.step, m.value] for m in sorted(client.get_metric_history(run.info.run_id, k),
                                                          key=lambda m: (m.step, m.timestamp))]
                   for k in run.data.metrics}
        files = []
        artifacts(client, run.info.run_id, None, files)
        out.append({"run_id": run.info.run_id, "status": run.info.status, "name": run.info.run_name,
                    "params": run.data.params, "tags": {k: v for k, v in run.data.tags.items()},
                    "metrics": metrics, "artifacts": files})
    print(json.dumps({"experiment_id": exp.experiment_id, "runs": out}))


if __name__ == "__main__":
    if sys.argv[1] == "wait":
        wait(sys.argv[2])
    else:
        read(sys.argv[2], sys.argv[3], sys.argv[4])
