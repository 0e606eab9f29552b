//! TEMPORARY until svs_nbd::ReconnectingClient lands.
use std::io;
use std::sync::{Arc, RwLock};
use svs_nbd::NbdClient;

#[derive(Default, Clone)]
pub struct ReconnectOptions;

pub struct ReconnectingClient {
    addr: String,
    export: String,
    inner: RwLock<Arc<NbdClient>>,
}

impl ReconnectingClient {
    pub fn connect(addr: String, export: String, _o: ReconnectOptions) -> io::Result<Self> {
        let c = NbdClient::connect(addr.as_str(), &export)?;
        Ok(ReconnectingClient {
            addr,
            export,
            inner: RwLock::new(Arc::new(c)),
        })
    }
    fn get(&self) -> Arc<NbdClient> {
        self.inner.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
    pub fn refresh_size(&self) -> io::Result<u64> {
        let c = NbdClient::connect(self.addr.as_str(), &self.export)?;
        let size = c.size();
        *self.inner.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(c);
        Ok(size)
    }
    pub fn size(&self) -> u64 {
        self.get().size()
    }
}

impl svs_hostdev::BlockDev for ReconnectingClient {
    fn size(&self) -> u64 {
        self.get().size()
    }
    fn read_only(&self) -> bool {
        self.get().read_only()
    }
    fn read(&self, o: u64, b: &mut [u8]) -> io::Result<()> {
        self.get().read(o, b)
    }
    fn write(&self, o: u64, d: &[u8], f: bool) -> io::Result<()> {
        self.get().write(o, d, f)
    }
    fn flush(&self) -> io::Result<()> {
        self.get().flush()
    }
    fn trim(&self, o: u64, l: u64) -> io::Result<()> {
        self.get().trim(o, l)
    }
}
