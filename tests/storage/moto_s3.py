"""Helpers for the object-store tests, run against a moto S3 server on loopback with boto3 (the reference client).

  moto_s3.py wait URL              waits for the server
  moto_s3.py setup URL BUCKET...  waits for the server, creates an IAM user allowed everything and its access key
                                  (moto checks signatures from then on), creates the buckets, prints the key as JSON
  moto_s3.py stat URL ID SECRET BUCKET KEY     prints {"size": n, "sha256": hex} of an object read with boto3
  moto_s3.py get URL ID SECRET BUCKET KEY      prints the object's bytes as text
  moto_s3.py list URL ID SECRET BUCKET PREFIX  prints the keys as a JSON list
  moto_s3.py put URL ID SECRET BUCKET KEY FILE uploads a file with boto3
  moto_s3.py put_dir URL ID SECRET BUCKET PREFIX DIR  uploads every file of DIR under PREFIX with boto3
  moto_s3.py delete URL ID SECRET BUCKET KEY   deletes an object
  moto_s3.py get_dir URL ID SECRET BUCKET PREFIX DIR  downloads the objects directly under PREFIX into DIR
  moto_s3.py composer_get URL ID SECRET BUCKET NAME DEST  MosaicML Composer's get_file("s3://BUCKET/NAME"), which
                                  follows a NAME.symlink pointer; then torch.load; prints {"batch": n}
"""
import hashlib
import json
import sys
import time
import urllib.request

import boto3


def client(url, key_id, secret, service="s3"):
    return boto3.client(service, endpoint_url=url, region_name="us-east-1", aws_access_key_id=key_id,
                        aws_secret_access_key=secret)


def wait(url):
    for _ in range(300):
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1)
            return
        except Exception:
            time.sleep(0.1)
    sys.exit("moto server at " + url + " did not start")


def main():
    cmd, url = sys.argv[1], sys.argv[2]
    if cmd == "wait":
        wait(url)
        return
    if cmd == "setup":
        wait(url)
        iam = client(url, "setup", "setup", "iam")
        iam.create_user(UserName="composer")
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        arn = iam.create_policy(PolicyName="all", PolicyDocument=json.dumps(policy))["Policy"]["Arn"]
        iam.attach_user_policy(UserName="composer", PolicyArn=arn)
        key = iam.create_access_key(UserName="composer")["AccessKey"]
        s3 = client(url, key["AccessKeyId"], key["SecretAccessKey"])
        for bucket in sys.argv[3:]:
            s3.create_bucket(Bucket=bucket)
        print(json.dumps({"id": key["AccessKeyId"], "secret": key["SecretAccessKey"]}))
        return
    s3 = client(url, sys.argv[3], sys.argv[4])
    bucket, key = sys.argv[5], sys.argv[6]
    if cmd == "stat":
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        print(json.dumps({"size": len(body), "sha256": hashlib.sha256(body).hexdigest()}))
    elif cmd == "get":
        sys.stdout.buffer.write(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    elif cmd == "list":
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key)
        print(json.dumps([o["Key"] for page in pages for o in page.get("Contents", [])]))
    elif cmd == "delete":
        s3.delete_object(Bucket=bucket, Key=key)
    elif cmd == "get_dir":
        import os
        os.makedirs(sys.argv[7], exist_ok=True)
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key.rstrip("/") + "/")
        for o in [o for page in pages for o in page.get("Contents", [])]:
            s3.download_file(bucket, o["Key"], os.path.join(sys.argv[7], o["Key"].rsplit("/", 1)[1]))
    elif cmd == "put":
        s3.upload_file(sys.argv[7], bucket, key)
    elif cmd == "put_dir":
        import os
        for name in sorted(os.listdir(sys.argv[7])):
            s3.upload_file(os.path.join(sys.argv[7], name), bucket, key.rstrip("/") + "/" + name)
    elif cmd == "composer_get":
        import os
        import torch
        from composer.utils import get_file
        os.environ.update(S3_ENDPOINT_URL=url, AWS_ACCESS_KEY_ID=sys.argv[3], AWS_SECRET_ACCESS_KEY=sys.argv[4])
        get_file(f"s3://{bucket}/{key}", sys.argv[7])
        timestamp = torch.load(sys.argv[7], weights_only=True)["state"]["timestamp"]
        print(json.dumps({"batch": int(timestamp["Timestamp"]["batch"])}))
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
