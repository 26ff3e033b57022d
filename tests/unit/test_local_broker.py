"""Pure logic of the local jar broker (no JVM started here)."""

from __future__ import annotations

import base64
import uuid

from worker.tools.dev import broker


def test_cluster_ids_never_start_with_a_dash(monkeypatch) -> None:
    # 0xF8 encodes to "-" as the first base64url character: the storage tool's parser would read it as an option
    dashed = uuid.UUID(bytes=bytes([0xF8]) + bytes(15))
    plain = uuid.UUID(bytes=bytes([0x10]) + bytes(15))
    draws = iter([dashed, dashed, plain])
    monkeypatch.setattr(broker.uuid, "uuid4", lambda: next(draws))
    assert base64.urlsafe_b64encode(dashed.bytes).decode().startswith("-")
    cluster_id = broker.new_cluster_id()
    assert cluster_id == base64.urlsafe_b64encode(plain.bytes).rstrip(b"=").decode()
    assert len(cluster_id) == 22


def test_cluster_ids_are_kafka_uuids() -> None:
    ids = {broker.new_cluster_id() for _ in range(2000)}
    assert len(ids) == 2000
    for cluster_id in ids:
        assert len(cluster_id) == 22 and not cluster_id.startswith("-")
        assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16
