"""Reads a TensorboardLogger run folder back with the real tensorboard package and prints what it holds as JSON.

usage: tensorboard_read.py RUN_DIR

Every record of every event file is read with TensorBoard's own record reader, which checks both CRC-32Cs and raises
on a bad one (this script then exits non-zero); the events are then loaded the way TensorBoard's server loads them
(EventAccumulator for scalars, images and text tensors; the hparams plugin's parsers for the hparams records).
"""
import io
import json
import pathlib
import sys

from PIL import Image
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub import errors, pywrap_tensorflow
from tensorboard.plugins.hparams import metadata as hparams_metadata


def records(path):
    reader = pywrap_tensorflow.PyRecordReader_New(str(path))
    out = []
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            return out
        event = event_pb2.Event()
        event.ParseFromString(reader.record())
        out.append(event)


def load(folder):
    acc = event_accumulator.EventAccumulator(str(folder), size_guidance={k: 0 for k in event_accumulator.DEFAULT_SIZE_GUIDANCE})
    acc.Reload()
    return acc


def main():
    run_dir = pathlib.Path(sys.argv[1])
    files = sorted(p for p in run_dir.iterdir() if "tfevents" in p.name)
    result = {"files": len(files), "file_versions": [], "records": 0}
    for f in files:
        events = records(f)
        result["records"] += len(events)
        result["file_versions"] += [e.file_version for e in events if e.HasField("file_version")]

    acc = load(run_dir)
    tags = acc.Tags()
    result["scalars"] = {t: [[e.step, e.value] for e in acc.Scalars(t)] for t in tags["scalars"]}
    result["images"] = {}
    for t in tags["images"]:
        result["images"][t] = []
        for e in acc.Images(t):
            png = Image.open(io.BytesIO(e.encoded_image_string))
            result["images"][t].append({"step": e.step, "width": e.width, "height": e.height, "mode": png.mode,
                                        "size": list(png.size), "pixels": list(png.getdata())[:4]})
    result["text"] = {}
    for t in tags["tensors"]:
        meta = acc.SummaryMetadata(t)
        if meta.plugin_data.plugin_name != "text":
            continue
        result["text"][t] = [[e.step, e.tensor_proto.string_val[0].decode()] for e in acc.Tensors(t)]

    hp_dirs = [d for d in run_dir.iterdir() if d.is_dir()]
    result["hparams"] = []
    for d in hp_dirs:
        for f in sorted(p for p in d.iterdir() if "tfevents" in p.name):
            for event in records(f):
                for value in event.summary.value:
                    content = value.metadata.plugin_data.content
                    if value.metadata.plugin_data.plugin_name != hparams_metadata.PLUGIN_NAME:
                        result["hparams"].append({"dir": d.name, "scalar": value.tag, "value": value.simple_value})
                    elif value.tag == hparams_metadata.EXPERIMENT_TAG:
                        exp = hparams_metadata.parse_experiment_plugin_data(content)
                        result["hparams"].append({"dir": d.name, "experiment": {
                            "hparams": [[h.name, h.type] for h in exp.hparam_infos],
                            "metrics": [m.name.tag for m in exp.metric_infos]}})
                    elif value.tag == hparams_metadata.SESSION_START_INFO_TAG:
                        ssi = hparams_metadata.parse_session_start_info_plugin_data(content)
                        result["hparams"].append({"dir": d.name, "start": {k: v.string_value for k, v in ssi.hparams.items()}})
                    elif value.tag == hparams_metadata.SESSION_END_INFO_TAG:
                        sei = hparams_metadata.parse_session_end_info_plugin_data(content)
                        result["hparams"].append({"dir": d.name, "end": sei.status})
    print(json.dumps(result))


if __name__ == "__main__":
    main()
