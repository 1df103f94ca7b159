//! `Kernel`: a compiled function with its argument signature. Calls are
//! checked; the machine code is freed when the kernel is dropped.

use std::time::Duration;

use cranelift_jit::JITModule;

use crate::runtime::NdBuffer;
use crate::te::{DType, HostTensor};

use super::error::KernelError;

/// The entry point of a compiled kernel: one pointer per parameter buffer.
pub(crate) type EntryFn = unsafe extern "C" fn(args: *const *mut u8);

/// One parameter of a kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelParam {
    /// The buffer's name.
    pub name: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its element type.
    pub dtype: DType,
}

/// A compiled kernel.
pub struct Kernel {
    name: String,
    module: Option<JITModule>,
    entry: EntryFn,
    params: Vec<KernelParam>,
    num_inputs: usize,
    compile_time: Duration,
    listing: Option<String>,
}

impl Kernel {
    pub(crate) fn new(
        name: String,
        module: JITModule,
        entry: EntryFn,
        params: Vec<KernelParam>,
        num_inputs: usize,
        compile_time: Duration,
    ) -> Kernel {
        Kernel {
            name,
            module: Some(module),
            entry,
            params,
            num_inputs,
            compile_time,
            listing: None,
        }
    }

    pub(crate) fn set_listing(&mut self, listing: Option<String>) {
        self.listing = listing;
    }

    /// The machine-code listing of the entry function, if it was requested
    /// with [`CodegenOptions::listing`](super::CodegenOptions::listing).
    pub fn listing(&self) -> Option<&str> {
        self.listing.as_deref()
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The parameters: inputs, then outputs.
    pub fn params(&self) -> &[KernelParam] {
        &self.params
    }

    /// How many of the parameters are inputs.
    pub fn num_inputs(&self) -> usize {
        self.num_inputs
    }

    /// Time taken to compile (translation, Cranelift, linking).
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// Runs the kernel on `args` (every parameter, in order), checking each
    /// buffer's shape and dtype first.
    pub fn run(&self, args: &mut [&mut NdBuffer]) -> Result<(), KernelError> {
        if args.len() != self.params.len() {
            return Err(KernelError::ArgumentCount {
                kernel: self.name.clone(),
                expected: self.params.len(),
                got: args.len(),
            });
        }
        for (index, (param, arg)) in self.params.iter().zip(args.iter()).enumerate() {
            if param.shape != arg.shape() || param.dtype != arg.dtype() {
                return Err(KernelError::ArgumentMismatch {
                    kernel: self.name.clone(),
                    index,
                    param: param.name.clone(),
                    expected: param.shape.clone(),
                    expected_dtype: param.dtype,
                    got: arg.shape().to_vec(),
                    got_dtype: arg.dtype(),
                });
            }
        }
        let pointers: Vec<*mut u8> = args.iter_mut().map(|a| a.as_mut_ptr()).collect();
        // SAFETY: the kernel was compiled for exactly these parameters, whose
        // shapes and dtypes were checked above; the buffers outlive the call.
        unsafe { (self.entry)(pointers.as_ptr()) };
        Ok(())
    }

    /// Calls the entry point with `pointers` (one per parameter), unchecked.
    ///
    /// # Safety
    /// Each pointer must address a live buffer of its parameter's size.
    /// (The measurement test hooks break this on purpose, in a worker
    /// process, to produce a real crash in generated code.)
    pub(crate) unsafe fn call_raw(&self, pointers: &[*mut u8]) {
        // SAFETY: upheld by the caller.
        unsafe { (self.entry)(pointers.as_ptr()) };
    }

    /// Fresh buffers for a run on `inputs`: the inputs copied, then every
    /// output [poisoned](NdBuffer::poison), so that an element the kernel
    /// never writes reads as NaN instead of passing as a zero.
    pub fn buffers_for(&self, inputs: &[HostTensor]) -> Result<Vec<NdBuffer>, KernelError> {
        if inputs.len() != self.num_inputs {
            return Err(KernelError::ArgumentCount {
                kernel: self.name.clone(),
                expected: self.num_inputs,
                got: inputs.len(),
            });
        }
        let mut buffers = Vec::with_capacity(self.params.len());
        for input in inputs {
            buffers.push(NdBuffer::from_host(input)?);
        }
        for param in &self.params[self.num_inputs..] {
            let mut output = NdBuffer::zeros(&param.shape, param.dtype)?;
            output.poison();
            buffers.push(output);
        }
        Ok(buffers)
    }

    /// Runs the kernel on host tensors (the inputs) and returns the outputs,
    /// which start [poisoned](Self::buffers_for).
    pub fn run_host(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, KernelError> {
        let mut buffers = self.buffers_for(inputs)?;
        let mut refs: Vec<&mut NdBuffer> = buffers.iter_mut().collect();
        self.run(&mut refs)?;
        Ok(buffers[self.num_inputs..]
            .iter()
            .map(NdBuffer::to_host)
            .collect())
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        if let Some(module) = self.module.take() {
            // SAFETY: the entry point is not used after the kernel is dropped.
            unsafe { module.free_memory() };
        }
    }
}
