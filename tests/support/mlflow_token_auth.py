"""The authorization function of the tests' authenticated MLflow server (tests/support/mlflow_server.h): a request
carrying `Authorization: Bearer $COMPOSER_TEST_MLFLOW_TOKEN` is the admin user; any other goes to MLflow's own basic
authentication (user name and password). MLflow's basic-auth app alone takes no tokens."""
import os

from flask import request
from mlflow.server import auth
from werkzeug.datastructures import Authorization


def authenticate_request():
    token = os.environ.get("COMPOSER_TEST_MLFLOW_TOKEN", "")
    if token and request.headers.get("Authorization", "") == "Bearer " + token:
        return Authorization("basic", {"username": "admin", "password": ""})
    return auth.authenticate_request_basic_auth()
