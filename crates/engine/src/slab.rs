//! A slab: values addressed by reusable indices.

/// Values with stable indices that are reused once freed (requests,
/// device operations, pending replies).
pub struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<usize>,
}

impl<T> Slab<T> {
    /// An empty slab.
    pub fn new() -> Self {
        Slab {
            items: Vec::new(),
            free: Vec::new(),
        }
    }
    /// Stores `v`; returns its index (a freed one when available).
    pub fn insert(&mut self, v: T) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.items[i] = Some(v);
                i
            }
            None => {
                self.items.push(Some(v));
                self.items.len() - 1
            }
        }
    }
    /// The value at `i`, if occupied, to read.
    pub fn get(&self, i: usize) -> Option<&T> {
        self.items.get(i).and_then(|x| x.as_ref())
    }
    /// The value at `i`, if occupied.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.items.get_mut(i).and_then(|x| x.as_mut())
    }
    /// Takes the value at `i` out, freeing the index.
    pub fn remove(&mut self, i: usize) -> Option<T> {
        let v = self.items.get_mut(i).and_then(|x| x.take());
        if v.is_some() {
            self.free.push(i);
        }
        v
    }
    /// Occupied indices.
    pub fn len(&self) -> usize {
        self.items.len() - self.free.len()
    }
    /// True when no index is occupied.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_are_stable_and_reused() {
        let mut s = Slab::new();
        let (a, b) = (s.insert('a'), s.insert('b'));
        assert_eq!(s.remove(a), Some('a'));
        assert_eq!(s.remove(a), None);
        assert_eq!(s.insert('c'), a);
        assert_eq!(s.get_mut(b), Some(&mut 'b'));
        assert_eq!(s.len(), 2);
    }
}
