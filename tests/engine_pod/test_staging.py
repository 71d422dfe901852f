"""Staging buffers: an upload is the device's own copy (the buffer is reused next tick), a download
lands in the buffer's leading rows."""

from __future__ import annotations

import torch

from liveplex.engine_pod import staging


def test_an_upload_does_not_alias_the_buffer_that_the_next_upload_rewrites():
    stage = staging.Staging((8,), torch.long, torch.device("cpu"))
    first = stage.upload(torch.arange(6).view(2, 3))
    second = stage.upload(torch.tensor([9, 9]))
    assert first.tolist() == [[0, 1, 2], [3, 4, 5]] and second.tolist() == [9, 9]
    assert first.untyped_storage().data_ptr() != stage.host.untyped_storage().data_ptr()


def test_send_copies_the_leading_rows_and_download_fills_them():
    stage = staging.Staging((4, 2), torch.float32, torch.device("cpu"))
    stage.writable()[:] = torch.arange(8.0).view(4, 2)
    dst = torch.zeros(3, 2)
    stage.send(dst)
    assert dst.tolist() == [[0, 1], [2, 3], [4, 5]]
    got = stage.download(torch.full((2, 2), 7.0))
    assert got.tolist() == [[7, 7], [7, 7]] and stage.host[2].tolist() == [4, 5]
