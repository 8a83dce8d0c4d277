//! A small cache that keeps at most so many entries and so many bytes, dropping the oldest
//! first: the daemon's answers, and what an index keeps for rendering (skill bodies, the
//! relevance guard's terms, whether referenced files exist).

use std::borrow::Borrow;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

pub struct FifoCache<K, V> {
    map: HashMap<K, (V, usize)>,
    order: VecDeque<K>,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
}

impl<K: Hash + Eq + Clone, V: Clone> FifoCache<K, V> {
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        FifoCache {
            map: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
            max_entries,
            max_bytes,
        }
    }

    /// What `k` holds; `k` may be a borrowed form of the key (a `&Path` for a `PathBuf`).
    pub fn get<Q: Hash + Eq + ?Sized>(&self, k: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.map.get(k).map(|(v, _)| v.clone())
    }

    /// Keeps `v` (`size` bytes, as the caller counts them) under `k`, replacing what `k` held,
    /// then drops the oldest entries until both bounds hold. A value bigger than the whole byte
    /// budget is not kept.
    pub fn put(&mut self, k: K, v: V, size: usize) {
        if size > self.max_bytes {
            return;
        }
        match self.map.insert(k.clone(), (v, size)) {
            Some((_, old)) => self.bytes = self.bytes - old + size,
            None => {
                self.order.push_back(k);
                self.bytes += size;
            }
        }
        while self.order.len() > self.max_entries || self.bytes > self.max_bytes {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some((_, size)) = self.map.remove(&old) {
                self.bytes -= size;
            }
        }
    }

    /// Bytes kept now.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    pub fn contains<Q: Hash + Eq + ?Sized>(&self, k: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.map.contains_key(k)
    }
}

#[cfg(test)]
mod tests {
    use super::FifoCache;

    #[test]
    fn both_bounds_hold_and_the_oldest_goes_first() {
        let mut c: FifoCache<u32, &str> = FifoCache::new(3, 10);
        for k in 0..3 {
            c.put(k, "x", 3);
        }
        assert_eq!((c.len(), c.bytes()), (3, 9));
        c.put(3, "x", 3);
        assert!(!c.contains(&0) && c.contains(&3), "entry bound");
        c.put(4, "x", 6);
        assert_eq!(c.bytes(), 9, "byte bound: 2 and 3 went");
        assert!(!c.contains(&2) && c.contains(&4));
        c.put(4, "y", 1);
        assert_eq!(
            (c.get(&4), c.bytes()),
            (Some("y"), 4),
            "replaced and re-counted"
        );
        c.put(5, "z", 11);
        assert!(!c.contains(&5), "bigger than the whole budget");
    }
}
