"""Stored sessions (GPT-Live's `store: true`, docs/storage.md): where a stored call's recording,
transcripts, settings and resume record are kept, outside any pod or gateway.

`store.ObjectStore` is the one interface (put, get, list, delete of whole objects by key); its
backends are a directory (`directory.DirectoryStore`: a PVC in the chart, the default of
`liveplex up`) and any S3-compatible store (`s3.S3Store`, the `store-s3` extra). What a stored
session is made of, and how a recording is put together from its chunks, is `layout` and
`recording` (pure: no I/O); `settings` holds the flags, and `retention` the sweep that deletes
sessions past their retention.
"""
