//! The fixed newstyle handshake: greeting, client flags, option haggling
//! until the client enters transmission (`NBD_OPT_GO`, `NBD_OPT_EXPORT_NAME`),
//! starts TLS (`NBD_OPT_STARTTLS`: the caller runs the TLS handshake, then
//! haggling goes on over TLS) or leaves.

use std::net::SocketAddr;

use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tracing::debug;

use crate::protocol::{self, ProtocolError};
use crate::{Exports, OpenedExport};

/// Why a handshake ended without an export.
#[derive(Debug, Error)]
pub(crate) enum HandshakeError {
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    #[error("NBD_OPT_EXPORT_NAME for an export that is unknown or not allowed")]
    UnknownExport,
    #[error("NBD_OPT_EXPORT_NAME before TLS, which this server requires")]
    TlsRequired,
    #[error("the client sent data after NBD_OPT_STARTTLS, before the TLS handshake")]
    DataBeforeTls,
    #[error("TLS handshake failed: {0}")]
    Tls(std::io::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The outcome of a successful handshake.
pub(crate) struct Negotiated {
    pub name: String,
    pub export: OpenedExport,
    /// `NBD_OPT_STRUCTURED_REPLY` was acknowledged.
    pub structured: bool,
    /// `base:allocation` was selected for this export: block status works.
    pub allocation: bool,
}

/// What the client negotiated so far (reset by STARTTLS: a new haggle).
#[derive(Default)]
struct Haggling {
    structured: bool,
    /// The export `base:allocation` was selected for by the last
    /// `NBD_OPT_SET_META_CONTEXT` (it counts only if the same export is
    /// then chosen).
    allocation_for: Option<String>,
}

impl Haggling {
    fn traits(&self, device: &dyn crate::BlockDevice) -> protocol::ExportTraits {
        protocol::ExportTraits {
            read_only: device.read_only(),
            structured: self.structured,
            shared_flush: device.shared_flush(),
        }
    }

    fn negotiated(&self, name: String, export: OpenedExport) -> Negotiated {
        let allocation = self.allocation_for.as_deref() == Some(name.as_str());
        Negotiated {
            name,
            export,
            structured: self.structured,
            allocation,
        }
    }
}

/// Where option haggling ended.
pub(crate) enum Haggled {
    /// The client chose an export and is in transmission.
    Export(Negotiated),
    /// The client aborted (`NBD_OPT_ABORT`).
    Aborted,
    /// STARTTLS was acknowledged: the TLS handshake comes next.
    StartTls,
}

/// TLS as haggling sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TlsState {
    /// The server can start TLS.
    pub offered: bool,
    /// Nothing but STARTTLS and ABORT before TLS.
    pub required: bool,
    /// TLS runs on this connection.
    pub active: bool,
}

/// Sends the greeting and reads the client's flags.
pub(crate) async fn greet<R, W>(
    reader: &mut R,
    writer: &mut W,
) -> Result<protocol::ClientFlags, HandshakeError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    writer.write_all(&protocol::greeting()).await?;
    writer.flush().await?;

    let mut flags = [0u8; 4];
    reader.read_exact(&mut flags).await?;
    let client = protocol::parse_client_flags(&flags)?;
    debug!(
        fixed_newstyle = client.fixed_newstyle,
        no_zeroes = client.no_zeroes,
        "client flags"
    );
    Ok(client)
}

/// Option haggling, until an export is chosen, the client leaves or TLS is
/// to start.
pub(crate) async fn haggle<R, W>(
    reader: &mut R,
    writer: &mut W,
    exports: &dyn Exports,
    peer: SocketAddr,
    max_payload: u32,
    client: protocol::ClientFlags,
    tls: TlsState,
) -> Result<Haggled, HandshakeError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut state = Haggling::default();
    loop {
        let mut header = [0u8; protocol::OPTION_HEADER_LEN];
        reader.read_exact(&mut header).await?;
        // The length is checked against MAX_OPTION_DATA before we allocate.
        let header = protocol::parse_option_header(&header)?;
        let mut data = vec![0u8; header.length as usize];
        reader.read_exact(&mut data).await?;
        let option = header.option;

        if tls.required && !tls.active && option != protocol::OPT_STARTTLS {
            match option {
                protocol::OPT_ABORT => {}
                // Cannot answer an error: the connection ends.
                protocol::OPT_EXPORT_NAME => return Err(HandshakeError::TlsRequired),
                _ => {
                    debug!(option, "option refused before TLS");
                    send(
                        writer,
                        option,
                        protocol::REP_ERR_TLS_REQD,
                        b"this server requires TLS: negotiate NBD_OPT_STARTTLS first",
                    )
                    .await?;
                    continue;
                }
            }
        }

        match option {
            protocol::OPT_STARTTLS => {
                let refusal: Option<(u32, &[u8])> = if !tls.offered {
                    Some((
                        protocol::REP_ERR_UNSUP,
                        b"TLS is not enabled on this server",
                    ))
                } else if !data.is_empty() {
                    Some((protocol::REP_ERR_INVALID, b"NBD_OPT_STARTTLS takes no data"))
                } else if tls.active {
                    Some((protocol::REP_ERR_INVALID, b"TLS is already negotiated"))
                } else {
                    None
                };
                match refusal {
                    Some((reply, message)) => send(writer, option, reply, message).await?,
                    None => {
                        send(writer, option, protocol::REP_ACK, &[]).await?;
                        return Ok(Haggled::StartTls);
                    }
                }
            }
            protocol::OPT_EXPORT_NAME => {
                // Cannot answer an error: an unusable name ends the session.
                let name =
                    protocol::parse_name(&data).map_err(|_| HandshakeError::UnknownExport)?;
                let export = exports
                    .open(&name, peer)
                    .ok_or(HandshakeError::UnknownExport)?;
                let device = &*export.device;
                let reply = protocol::export_name_reply(
                    device.size(),
                    protocol::transmission_flags(state.traits(device)),
                    client.no_zeroes,
                );
                writer.write_all(&reply).await?;
                writer.flush().await?;
                return Ok(Haggled::Export(state.negotiated(name, export)));
            }
            protocol::OPT_ABORT => {
                // The client may already be gone: a failed ACK changes nothing.
                let _ = send(writer, option, protocol::REP_ACK, &[]).await;
                return Ok(Haggled::Aborted);
            }
            protocol::OPT_LIST => {
                if !data.is_empty() {
                    send(
                        writer,
                        option,
                        protocol::REP_ERR_INVALID,
                        b"NBD_OPT_LIST takes no data",
                    )
                    .await?;
                    continue;
                }
                for name in exports.list(peer) {
                    if name.len() > protocol::MAX_STRING {
                        continue;
                    }
                    send_part(
                        writer,
                        option,
                        protocol::REP_SERVER,
                        &protocol::rep_server_data(&name),
                    )
                    .await?;
                }
                send(writer, option, protocol::REP_ACK, &[]).await?;
            }
            protocol::OPT_INFO | protocol::OPT_GO => {
                let request = match protocol::parse_info_request(&data) {
                    Ok(r) => r,
                    Err(e) => {
                        debug!(option, error = %e, "invalid info request");
                        send(
                            writer,
                            option,
                            protocol::REP_ERR_INVALID,
                            e.to_string().as_bytes(),
                        )
                        .await?;
                        continue;
                    }
                };
                let Some(export) = exports.open(&request.name, peer) else {
                    debug!(option, "export unknown or not allowed");
                    send(
                        writer,
                        option,
                        protocol::REP_ERR_UNKNOWN,
                        b"export not available",
                    )
                    .await?;
                    continue;
                };
                let device = &*export.device;
                let flags = protocol::transmission_flags(state.traits(device));
                let size = device.size();
                send_part(
                    writer,
                    option,
                    protocol::REP_INFO,
                    &protocol::info_export(size, flags),
                )
                .await?;
                // Sent whether asked or not: our maximum is below the
                // protocol's default ("unlimited"), and clients ignore infos
                // they did not ask for.
                let block = protocol::info_block_size(
                    protocol::MIN_BLOCK_SIZE,
                    protocol::PREFERRED_BLOCK_SIZE,
                    max_payload,
                );
                send_part(writer, option, protocol::REP_INFO, &block).await?;
                if request.requests.contains(&protocol::INFO_NAME) {
                    send_part(
                        writer,
                        option,
                        protocol::REP_INFO,
                        &protocol::info_name(&request.name),
                    )
                    .await?;
                }
                send(writer, option, protocol::REP_ACK, &[]).await?;
                if option == protocol::OPT_GO {
                    return Ok(Haggled::Export(state.negotiated(request.name, export)));
                }
                // NBD_OPT_INFO: the export is dropped, haggling goes on.
                debug!(export = %request.name, "export information given");
            }
            protocol::OPT_STRUCTURED_REPLY => {
                if data.is_empty() {
                    state.structured = true;
                    send(writer, option, protocol::REP_ACK, &[]).await?;
                } else {
                    send(
                        writer,
                        option,
                        protocol::REP_ERR_INVALID,
                        b"NBD_OPT_STRUCTURED_REPLY takes no data",
                    )
                    .await?;
                }
            }
            protocol::OPT_LIST_META_CONTEXT | protocol::OPT_SET_META_CONTEXT => {
                let setting = option == protocol::OPT_SET_META_CONTEXT;
                if setting {
                    // A new selection replaces the old one, even when it fails.
                    state.allocation_for = None;
                }
                let refusal: Option<(u32, String)> = if !state.structured {
                    Some((
                        protocol::REP_ERR_INVALID,
                        "negotiate NBD_OPT_STRUCTURED_REPLY first".into(),
                    ))
                } else {
                    match protocol::parse_meta_context_request(&data) {
                        Err(e) => Some((protocol::REP_ERR_INVALID, e.to_string())),
                        Ok(request) if exports.open(&request.name, peer).is_none() => {
                            Some((protocol::REP_ERR_UNKNOWN, "export not available".into()))
                        }
                        Ok(request) => {
                            // No query: listing shows every context, setting
                            // selects none.
                            let allocation = if request.queries.is_empty() {
                                !setting
                            } else {
                                request
                                    .queries
                                    .iter()
                                    .any(|q| protocol::query_matches_allocation(q, !setting))
                            };
                            if allocation {
                                // Listed contexts carry id 0, as the protocol asks.
                                let id = if setting {
                                    protocol::ALLOCATION_CONTEXT_ID
                                } else {
                                    0
                                };
                                send_part(
                                    writer,
                                    option,
                                    protocol::REP_META_CONTEXT,
                                    &protocol::rep_meta_context_data(
                                        id,
                                        protocol::CONTEXT_BASE_ALLOCATION,
                                    ),
                                )
                                .await?;
                                if setting {
                                    state.allocation_for = Some(request.name);
                                }
                            }
                            None
                        }
                    }
                };
                match refusal {
                    Some((reply, message)) => {
                        debug!(option, %message, "meta context option refused");
                        send(writer, option, reply, message.as_bytes()).await?;
                    }
                    None => send(writer, option, protocol::REP_ACK, &[]).await?,
                }
            }
            _ => {
                // Extended headers and anything unknown: not supported, keep
                // negotiating.
                debug!(option, "unsupported option");
                send(
                    writer,
                    option,
                    protocol::REP_ERR_UNSUP,
                    b"option not supported",
                )
                .await?;
            }
        }
    }
}

/// Writes one option reply without flushing (more replies follow).
async fn send_part<W: AsyncWrite + Unpin>(
    writer: &mut W,
    option: u32,
    reply_type: u32,
    data: &[u8],
) -> std::io::Result<()> {
    writer
        .write_all(&protocol::option_reply(option, reply_type, data))
        .await
}

/// Writes the final reply to an option and flushes.
async fn send<W: AsyncWrite + Unpin>(
    writer: &mut W,
    option: u32,
    reply_type: u32,
    data: &[u8],
) -> std::io::Result<()> {
    send_part(writer, option, reply_type, data).await?;
    writer.flush().await
}
