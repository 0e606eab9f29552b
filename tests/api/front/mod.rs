//! A volume's front in `svs serve`, through real NBD clients: attachments
//! and volume I/O, and the NBD protocol's features (block status, several
//! connections at once).

mod attach;
mod nbd_protocol;
