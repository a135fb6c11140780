# bench/moto.sh -- sourced by the object-store benchmarks: makes $work (removed at exit), starts a moto S3 server on
# a free loopback port (stopped at exit) and points the AWS variables (and Streaming's S3_ENDPOINT_URL) at it.
PY=.venv/bin/python
work="$(mktemp -d)"
port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
.venv/bin/moto_server -H 127.0.0.1 -p "$port" > "$work/moto.log" 2>&1 &
moto=$!
trap 'kill $moto 2>/dev/null; rm -rf "$work"' EXIT
export AWS_ENDPOINT_URL="http://127.0.0.1:$port" S3_ENDPOINT_URL="http://127.0.0.1:$port" AWS_ACCESS_KEY_ID=bench \
  AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1
$PY tests/storage/moto_s3.py wait "$AWS_ENDPOINT_URL"
$PY -c "import boto3; boto3.client('s3').create_bucket(Bucket='bench')"
