"""The reference side of bench/object_store.sh: the same transfers as bench/object_store's `transfer` mode, through
Composer's S3ObjectStore (boto3, its default transfer configuration: 8 MiB parts, 10 threads)."""
import os
import sys
import time

from composer.utils.object_store import S3ObjectStore


def main():
    path, count = sys.argv[1], int(sys.argv[2])
    store = S3ObjectStore(bucket="bench", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    mib = os.path.getsize(path) / (1 << 20)
    t0 = time.perf_counter()
    store.upload_object("big.bin", path)
    up = time.perf_counter() - t0
    t0 = time.perf_counter()
    store.download_object("big.bin", path + ".pyback", overwrite=True)
    down = time.perf_counter() - t0
    small = path + ".pysmall"
    with open(small, "wb") as f:
        f.write(b"x" * (64 << 10))
    t0 = time.perf_counter()
    for i in range(count):
        store.upload_object(f"small/{i}", small)
    small_up = time.perf_counter() - t0
    t0 = time.perf_counter()
    listed = store.list_objects("small/")
    lst = time.perf_counter() - t0
    print(f"RESULT impl=python upload_mib_s={mib / up} download_mib_s={mib / down} "
          f"small_put_ms={1000 * small_up / count} list_ms={1000 * lst} listed={len(listed)}", flush=True)


if __name__ == "__main__":
    main()
