//! The kernel helper functions steadytrace calls, by their numbers in `enum bpf_func_id`.

macro_rules! helpers {
    ($($name:ident = $id:expr, $text:expr;)*) => {
        /// A kernel helper function.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Helper { $($name = $id,)* }

        impl Helper {
            /// The helper's C name, as `bpftool` and the verifier print it.
            pub fn name_of(id: i32) -> Option<&'static str> {
                match id { $($id => Some($text),)* _ => None }
            }

            /// The helper of this number, if steadytrace knows it.
            pub fn from_id(id: i32) -> Option<Helper> {
                match id { $($id => Some(Helper::$name),)* _ => None }
            }
        }
    };
}

helpers! {
    MapLookupElem = 1, "map_lookup_elem";
    MapUpdateElem = 2, "map_update_elem";
    MapDeleteElem = 3, "map_delete_elem";
    ProbeRead = 4, "probe_read";
    KtimeGetNs = 5, "ktime_get_ns";
    TracePrintk = 6, "trace_printk";
    GetPrandomU32 = 7, "get_prandom_u32";
    GetSmpProcessorId = 8, "get_smp_processor_id";
    TailCall = 12, "tail_call";
    GetCurrentPidTgid = 14, "get_current_pid_tgid";
    GetCurrentUidGid = 15, "get_current_uid_gid";
    GetCurrentComm = 16, "get_current_comm";
    GetStackid = 27, "get_stackid";
    GetCurrentTask = 35, "get_current_task";
    ProbeWriteUser = 36, "probe_write_user";
    GetNumaNodeId = 42, "get_numa_node_id";
    ProbeReadStr = 45, "probe_read_str";
    GetSocketCookie = 46, "get_socket_cookie";
    OverrideReturn = 58, "override_return";
    GetStack = 67, "get_stack";
    GetCurrentCgroupId = 80, "get_current_cgroup_id";
    SendSignal = 109, "send_signal";
    SkbOutput = 111, "skb_output";
    ProbeReadUser = 112, "probe_read_user";
    ProbeReadKernel = 113, "probe_read_kernel";
    ProbeReadUserStr = 114, "probe_read_user_str";
    ProbeReadKernelStr = 115, "probe_read_kernel_str";
    SendSignalThread = 117, "send_signal_thread";
    Jiffies64 = 118, "jiffies64";
    GetNsCurrentPidTgid = 120, "get_ns_current_pid_tgid";
    KtimeGetBootNs = 125, "ktime_get_boot_ns";
    SeqPrintf = 126, "seq_printf";
    RingbufOutput = 130, "ringbuf_output";
    RingbufReserve = 131, "ringbuf_reserve";
    RingbufSubmit = 132, "ringbuf_submit";
    RingbufDiscard = 133, "ringbuf_discard";
    DPath = 147, "d_path";
    PerCpuPtr = 153, "per_cpu_ptr";
    GetCurrentTaskBtf = 158, "get_current_task_btf";
    ThisCpuPtr = 154, "this_cpu_ptr";
    ForEachMapElem = 164, "for_each_map_elem";
    TimerInit = 169, "timer_init";
    TimerSetCallback = 170, "timer_set_callback";
    TimerStart = 171, "timer_start";
    GetFuncIp = 173, "get_func_ip";
    GetAttachCookie = 174, "get_attach_cookie";
    TaskPtRegs = 175, "task_pt_regs";
    Loop = 181, "loop";
    MapLookupPercpuElem = 195, "map_lookup_percpu_elem";
    KtimeGetTaiNs = 208, "ktime_get_tai_ns";
}

impl Helper {
    pub fn id(self) -> u32 {
        self as u32
    }
}
