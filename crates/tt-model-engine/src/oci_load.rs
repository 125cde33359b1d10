//! Load an image from an OCI image layout (the inverse of [`crate::export`]).
//!
//! dockerd 20.10's load endpoint only understands docker-archives (`manifest.json`, a config
//! `<hex>.json`, `<dir>/layer.tar` per layer); OCI-layout input arrived in Docker 25. So we
//! read the layout's index and manifest, then stream a docker-archive built on the fly from
//! the layout's blobs straight into the load request: no temporary copy of the layers.
//!
//! Blobs are opened through the filesystem, so symlinks are followed: a layout inside a
//! Hugging Face snapshot is a farm of symlinks into the content store. Every blob is hashed
//! while it streams; a blob whose bytes do not match its digest aborts the request before the
//! archive's `manifest.json` (written last) is sent, so the engine never loads it. After the
//! load, the image the engine reports under the tag must be the layout's image.

use std::io::{self, BufWriter, Write};
use std::sync::{Arc, Mutex};

use bollard::query_parameters::ImportImageOptions;
use bytes::Bytes;
use futures_util::StreamExt;

use crate::client::Client;
use crate::error::{Cause, EngineError};

use tt_model_oci::layout::{LayoutError, OciLayout};

/// Bytes per chunk sent to the engine; the channel holds a few, bounding memory.
const CHUNK: usize = 1 << 20;
const CHANNEL_CHUNKS: usize = 4;

/// Why loading a layout failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The layout is unreadable, malformed, corrupt or another image than expected.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// The load request failed (engine unreachable, connection dropped).
    #[error("Loading image `{reference}` into the engine failed")]
    Request {
        /// The reference the image was loaded under.
        reference: String,
        /// The client library's error.
        #[source]
        source: Cause,
    },
    /// The engine refused the archive.
    #[error("The engine refused to load image `{reference}`: {message}")]
    Refused {
        /// The reference the image was to be loaded under.
        reference: String,
        /// The engine's error message.
        message: String,
    },
    /// After the load the tag points at another image (or at none).
    #[error("After loading, `{reference}` is {found}, not the layout's image {expected}")]
    NotLoaded {
        /// The reference the image was loaded under.
        reference: String,
        /// The layout's image id.
        expected: String,
        /// The id the reference resolves to now, or `absent`.
        found: String,
    },
    /// Inspecting the loaded image failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Told the byte count of each chunk a load streams to the engine.
pub type OnBytes = Arc<dyn Fn(u64) + Send + Sync>;

/// What a load did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The engine's id of the loaded image.
    pub id: String,
    /// The tag it was loaded under.
    pub reference: String,
    /// Archive bytes streamed.
    pub bytes: u64,
}

impl Client {
    /// Loads the image of `layout` tagged `reference` and checks that the tag then names the
    /// layout's image. The archive is generated while it uploads.
    pub async fn load_oci_layout(
        &self,
        layout: &OciLayout,
        reference: &str,
    ) -> Result<Loaded, LoadError> {
        self.load_oci_layout_with(layout, reference, Arc::new(|_| {}))
            .await
    }

    /// [`Client::load_oci_layout`], telling `on_bytes` each chunk of the archive as it is
    /// handed to the engine ([`OciLayout::archive_size`] bytes in all).
    pub async fn load_oci_layout_with(
        &self,
        layout: &OciLayout,
        reference: &str,
        on_bytes: OnBytes,
    ) -> Result<Loaded, LoadError> {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Bytes, io::Error>>(CHANNEL_CHUNKS);
        // The producer's own error wins over the engine's view of the aborted upload.
        let failure: Arc<Mutex<Option<LoadError>>> = Arc::default();
        let producer = {
            let (layout, reference, failure) =
                (layout.clone(), reference.to_string(), failure.clone());
            tokio::task::spawn_blocking(move || {
                let writer = BufWriter::with_capacity(
                    CHUNK,
                    ChannelWriter {
                        tx: tx.clone(),
                        on_bytes,
                    },
                );
                match layout.write_docker_archive(&reference, writer) {
                    Ok(n) => Some(n),
                    Err(e) => {
                        // An error item aborts the request body, so the engine sees a
                        // truncated archive without manifest.json and loads nothing.
                        let _ = tx.blocking_send(Err(io::Error::other(e.to_string())));
                        *failure.lock().expect("not poisoned") = Some(e.into());
                        None
                    }
                }
            })
        };
        let body = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
        let options = ImportImageOptions {
            quiet: true,
            ..Default::default()
        };
        let mut responses =
            self.docker()
                .import_image(options, bollard::body_try_stream(body), None);
        let mut engine_err = None;
        while let Some(item) = responses.next().await {
            match item {
                Ok(_) => {}
                // The answer may be whole but for a line end: the look-up below, which
                // compares the engine's image with the layout's, decides.
                Err(e) if crate::torn_line_end::is_torn_line_end(&e) => break,
                Err(e) => {
                    engine_err = Some(e);
                    break;
                }
            }
        }
        drop(responses);
        let bytes = producer.await.ok().flatten();
        if let Some(e) = failure.lock().expect("not poisoned").take() {
            return Err(e);
        }
        match engine_err {
            Some(bollard::errors::Error::DockerStreamError { error }) => {
                return Err(LoadError::Refused {
                    reference: reference.to_string(),
                    message: error.trim().to_string(),
                });
            }
            Some(source) => {
                return Err(LoadError::Request {
                    reference: reference.to_string(),
                    source,
                });
            }
            None => {}
        }
        let pinned = reference.is_empty() || reference.contains('@');
        let look_up = if pinned { layout.image_id() } else { reference };
        let found = self.image(look_up).await?;
        match found {
            Some(facts) if layout.is_image(&facts.id) => Ok(Loaded {
                id: facts.id,
                reference: reference.to_string(),
                bytes: bytes.unwrap_or_default(),
            }),
            other => Err(LoadError::NotLoaded {
                reference: reference.to_string(),
                expected: layout.image_id().to_string(),
                found: other.map_or_else(|| "absent".to_string(), |f| f.id),
            }),
        }
    }
}

/// The write end of the request body: each buffered chunk becomes one body frame.
struct ChannelWriter {
    tx: tokio::sync::mpsc::Sender<Result<Bytes, io::Error>>,
    /// Told how many bytes each write handed to the engine (the load's progress).
    on_bytes: OnBytes,
}

impl Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tx
            .blocking_send(Ok(Bytes::copy_from_slice(buf)))
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "the engine closed the load request",
                )
            })?;
        (self.on_bytes)(buf.len() as u64);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
