"""Sources: what fills a rank's buffer while the trainer reads it (`Source`, and
`IterableSource` for in-process data). The stream's `StreamSource` is one. What a
source applies to each sample before it puts it: `ingest_transform`. When a source
says that training waits for its first data: `first_data`.

Torch-free; imports `buffers` only.
"""

from melissa_trainer.sources.ingest_transform import IngestTransform, IngestTransformError
from melissa_trainer.sources.iterable import IterableSource, SampleFactory, as_sample, as_source
from melissa_trainer.sources.source import Source, SourceError

__all__ = [
    "IngestTransform",
    "IngestTransformError",
    "IterableSource",
    "SampleFactory",
    "Source",
    "SourceError",
    "as_sample",
    "as_source",
]
