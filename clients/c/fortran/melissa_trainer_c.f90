! melissa_trainer_c: the C functions of melissa_trainer.h as Fortran interfaces, and the
! string conversions between the two languages. Internal to the Fortran binding: a
! program uses the module melissa_trainer (melissa_trainer.f90), which wraps these.
module melissa_trainer_c
  use, intrinsic :: iso_c_binding, only: c_ptr, c_char, c_int, c_int64_t, c_double, &
                                         c_size_t, c_null_char, c_associated, c_f_pointer, &
                                         c_null_ptr
  implicit none
  private
  public :: c_string, f_string
  public :: mt_strerror_c, mt_client_error_c, mt_version_c, mt_client_create_c, &
            mt_set_simulation_id_c, mt_set_endpoints_c, mt_set_rendezvous_c, &
            mt_set_parameter_c, mt_set_send_timeout_c, mt_set_close_timeout_c, &
            mt_set_disconnected_timeout_c, mt_set_replay_bytes_c, mt_set_follow_timeout_c, &
            mt_set_failed_close_timeout_c, &
            mt_set_batching_c, mt_set_sndhwm_c, mt_set_reuse_c, &
            mt_set_rank_c, mt_declare_field_c, mt_declare_part_c, &
            mt_declare_part_count_c, mt_client_start_c, mt_send_c, mt_flush_c, &
            mt_client_close_c, mt_client_close_message_c, mt_client_abort_c, mt_client_simulation_id_c, &
            mt_client_fail_message_c, &
            mt_client_receivers_c, mt_client_parameter_c, mt_field_count_c, &
            mt_field_name_c, mt_field_size_c, mt_field_part_count_c, mt_set_part_offset_c, &
            mt_predict_c, mt_predict_refusal_c, mt_set_serve_endpoints_c, &
            mt_set_curve_server_key_c, mt_fields_mark_c, mt_fields_differ_c

  !> mt_input and mt_output of melissa_trainer.h (mt_predict's arrays).
  type, bind(C), public :: mt_input_c
    type(c_ptr) :: name = c_null_ptr, data = c_null_ptr, shape = c_null_ptr
    integer(c_int) :: dtype = 0, ndim = 0
  end type
  type, bind(C), public :: mt_output_c
    type(c_ptr) :: name = c_null_ptr, data = c_null_ptr
    integer(c_int64_t) :: capacity = 0
    integer(c_int) :: dtype = 0, ndim = 0
    integer(c_int64_t) :: shape(8) = 0
    integer(c_int64_t) :: count = 0
  end type

  ! Enumerations are passed as int (C11: an enum's type is compatible with an integer
  ! type that holds its values; gcc and clang use int for these small ones). uint64_t
  ! values travel as c_int64_t with the same bits (Fortran has no unsigned integers).
  interface
    function mt_strerror_c(status) bind(C, name="mt_strerror") result(text)
      import :: c_int, c_ptr
      integer(c_int), value :: status
      type(c_ptr) :: text
    end function
    function mt_client_error_c(c) bind(C, name="mt_client_error") result(text)
      import :: c_ptr
      type(c_ptr), value :: c
      type(c_ptr) :: text
    end function
    function mt_version_c() bind(C, name="mt_version") result(text)
      import :: c_ptr
      type(c_ptr) :: text
    end function
    function mt_client_create_c(out) bind(C, name="mt_client_create") result(status)
      import :: c_ptr, c_int
      type(c_ptr), intent(out) :: out
      integer(c_int) :: status
    end function
    function mt_set_simulation_id_c(c, id) bind(C, name="mt_set_simulation_id") result(status)
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: c
      integer(c_int64_t), value :: id
      integer(c_int) :: status
    end function
    function mt_set_endpoints_c(c, endpoints) bind(C, name="mt_set_endpoints") result(status)
      import :: c_ptr, c_int, c_char
      type(c_ptr), value :: c
      character(kind=c_char), intent(in) :: endpoints(*)
      integer(c_int) :: status
    end function
    function mt_set_rendezvous_c(c, directory, timeout_s) &
        bind(C, name="mt_set_rendezvous") result(status)
      import :: c_ptr, c_int, c_char, c_double
      type(c_ptr), value :: c
      character(kind=c_char), intent(in) :: directory(*)
      real(c_double), value :: timeout_s
      integer(c_int) :: status
    end function
    function mt_set_parameter_c(c, name, value) bind(C, name="mt_set_parameter") result(status)
      import :: c_ptr, c_int, c_char, c_double
      type(c_ptr), value :: c
      character(kind=c_char), intent(in) :: name(*)
      real(c_double), value :: value
      integer(c_int) :: status
    end function
    function mt_set_send_timeout_c(c, seconds) bind(C, name="mt_set_send_timeout") &
        result(status)
      import :: c_ptr, c_int, c_double
      type(c_ptr), value :: c
      real(c_double), value :: seconds
      integer(c_int) :: status
    end function
    function mt_set_close_timeout_c(c, seconds) bind(C, name="mt_set_close_timeout") &
        result(status)
      import :: c_ptr, c_int, c_double
      type(c_ptr), value :: c
      real(c_double), value :: seconds
      integer(c_int) :: status
    end function
    function mt_set_failed_close_timeout_c(c, seconds) &
        bind(C, name="mt_set_failed_close_timeout") result(status)
      import :: c_ptr, c_int, c_double
      type(c_ptr), value :: c
      real(c_double), value :: seconds
      integer(c_int) :: status
    end function
    function mt_set_disconnected_timeout_c(c, seconds) &
        bind(C, name="mt_set_disconnected_timeout") result(status)
      import :: c_ptr, c_int, c_double
      type(c_ptr), value :: c
      real(c_double), value :: seconds
      integer(c_int) :: status
    end function
    function mt_set_replay_bytes_c(c, bytes) bind(C, name="mt_set_replay_bytes") &
        result(status)
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: c
      integer(c_int64_t), value :: bytes
      integer(c_int) :: status
    end function
    function mt_set_follow_timeout_c(c, seconds) bind(C, name="mt_set_follow_timeout") &
        result(status)
      import :: c_ptr, c_int, c_double
      type(c_ptr), value :: c
      real(c_double), value :: seconds
      integer(c_int) :: status
    end function
    function mt_set_batching_c(c, bytes, delay_s) bind(C, name="mt_set_batching") &
        result(status)
      import :: c_ptr, c_int, c_size_t, c_double
      type(c_ptr), value :: c
      integer(c_size_t), value :: bytes
      real(c_double), value :: delay_s
      integer(c_int) :: status
    end function
    function mt_set_sndhwm_c(c, messages) bind(C, name="mt_set_sndhwm") result(status)
      import :: c_ptr, c_int
      type(c_ptr), value :: c
      integer(c_int), value :: messages
      integer(c_int) :: status
    end function
    function mt_set_reuse_c(c, mode) bind(C, name="mt_set_reuse") result(status)
      import :: c_ptr, c_int
      type(c_ptr), value :: c
      integer(c_int), value :: mode
      integer(c_int) :: status
    end function
    function mt_set_rank_c(c, rank, size) bind(C, name="mt_set_rank") result(status)
      import :: c_ptr, c_int
      type(c_ptr), value :: c
      integer(c_int), value :: rank, size
      integer(c_int) :: status
    end function
    function mt_declare_field_c(c, name, dtype, ndim, shape) &
        bind(C, name="mt_declare_field") result(status)
      import :: c_ptr, c_int, c_char, c_int64_t
      type(c_ptr), value :: c
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), value :: dtype, ndim
      integer(c_int64_t), intent(in) :: shape(*)
      integer(c_int) :: status
    end function
    function mt_declare_part_c(c, name, offset, count) bind(C, name="mt_declare_part") &
        result(status)
      import :: c_ptr, c_int, c_char, c_int64_t
      type(c_ptr), value :: c
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int64_t), value :: offset, count
      integer(c_int) :: status
    end function
    function mt_declare_part_count_c(c, name, count) bind(C, name="mt_declare_part_count") &
        result(status)
      import :: c_ptr, c_int, c_char, c_int64_t
      type(c_ptr), value :: c
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int64_t), value :: count
      integer(c_int) :: status
    end function
    function mt_client_start_c(c) bind(C, name="mt_client_start") result(status)
      import :: c_ptr, c_int
      type(c_ptr), value :: c
      integer(c_int) :: status
    end function
    function mt_send_c(c, time_step, field, dtype, data, count) bind(C, name="mt_send") &
        result(status)
      import :: c_ptr, c_int, c_char, c_int64_t
      type(c_ptr), value :: c
      integer(c_int64_t), value :: time_step
      character(kind=c_char), intent(in) :: field(*)
      integer(c_int), value :: dtype
      type(c_ptr), value :: data
      integer(c_int64_t), value :: count
      integer(c_int) :: status
    end function
    function mt_flush_c(c) bind(C, name="mt_flush") result(status)
      import :: c_ptr, c_int
      type(c_ptr), value :: c
      integer(c_int) :: status
    end function
    function mt_client_close_c(c) bind(C, name="mt_client_close") result(status)
      import :: c_ptr, c_int
      type(c_ptr), value :: c
      integer(c_int) :: status
    end function
    function mt_client_close_message_c(c, message, size) bind(C, name="mt_client_close_message") &
        result(status)
      import :: c_ptr, c_char, c_size_t, c_int
      type(c_ptr), value :: c
      character(kind=c_char), intent(out) :: message(*)
      integer(c_size_t), value :: size
      integer(c_int) :: status
    end function
    subroutine mt_client_abort_c(c) bind(C, name="mt_client_abort")
      import :: c_ptr
      type(c_ptr), value :: c
    end subroutine
    function mt_client_fail_message_c(c, reason, message, size) &
        bind(C, name="mt_client_fail_message") result(status)
      import :: c_ptr, c_char, c_size_t, c_int
      type(c_ptr), value :: c
      character(kind=c_char), intent(in) :: reason(*)
      character(kind=c_char), intent(out) :: message(*)
      integer(c_size_t), value :: size
      integer(c_int) :: status
    end function
    function mt_client_simulation_id_c(c) bind(C, name="mt_client_simulation_id") result(id)
      import :: c_ptr, c_int64_t
      type(c_ptr), value :: c
      integer(c_int64_t) :: id
    end function
    function mt_client_receivers_c(c) bind(C, name="mt_client_receivers") result(n)
      import :: c_ptr, c_int
      type(c_ptr), value :: c
      integer(c_int) :: n
    end function
    function mt_client_parameter_c(c, name, value) bind(C, name="mt_client_parameter") &
        result(status)
      import :: c_ptr, c_int, c_char, c_double
      type(c_ptr), value :: c
      character(kind=c_char), intent(in) :: name(*)
      real(c_double), intent(out) :: value
      integer(c_int) :: status
    end function
    ! The accessors that the MPI start needs (melissa_trainer.h): fields by 0-based index.
    function mt_field_count_c(c) bind(C, name="mt_field_count") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: c
      integer(c_size_t) :: n
    end function
    function mt_field_name_c(c, index) bind(C, name="mt_field_name") result(name)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: c
      integer(c_size_t), value :: index
      type(c_ptr) :: name
    end function
    function mt_fields_mark_c(c) bind(C, name="mt_fields_mark") result(mark)
      import :: c_ptr, c_int64_t
      type(c_ptr), value :: c
      integer(c_int64_t) :: mark
    end function
    function mt_fields_differ_c(c, rank, ranks) bind(C, name="mt_fields_differ") &
        result(status)
      import :: c_ptr, c_int
      type(c_ptr), value :: c
      integer(c_int), value :: rank, ranks
      integer(c_int) :: status
    end function
    function mt_field_size_c(c, index) bind(C, name="mt_field_size") result(n)
      import :: c_ptr, c_size_t, c_int64_t
      type(c_ptr), value :: c
      integer(c_size_t), value :: index
      integer(c_int64_t) :: n
    end function
    function mt_field_part_count_c(c, index, count) bind(C, name="mt_field_part_count") &
        result(kind)
      import :: c_ptr, c_size_t, c_int64_t, c_int
      type(c_ptr), value :: c
      integer(c_size_t), value :: index
      integer(c_int64_t), intent(out) :: count
      integer(c_int) :: kind
    end function
    function mt_set_part_offset_c(c, index, offset) bind(C, name="mt_set_part_offset") &
        result(status)
      import :: c_ptr, c_size_t, c_int64_t, c_int
      type(c_ptr), value :: c
      integer(c_size_t), value :: index
      integer(c_int64_t), value :: offset
      integer(c_int) :: status
    end function
    function mt_predict_c(c, inputs, n_inputs, outputs, n_outputs, timeout_s, version) &
        bind(C, name="mt_predict") result(status)
      import :: c_ptr, c_int, c_size_t, c_double, c_int64_t, mt_input_c, mt_output_c
      type(c_ptr), value :: c
      type(mt_input_c), intent(in) :: inputs(*)
      integer(c_size_t), value :: n_inputs
      type(mt_output_c), intent(inout) :: outputs(*)
      integer(c_size_t), value :: n_outputs
      real(c_double), value :: timeout_s
      integer(c_int64_t), intent(out) :: version
      integer(c_int) :: status
    end function
    function mt_predict_refusal_c(c, retry_after_s) bind(C, name="mt_predict_refusal") &
        result(code)
      import :: c_ptr, c_int, c_double
      type(c_ptr), value :: c
      real(c_double), intent(out) :: retry_after_s
      integer(c_int) :: code
    end function
    function mt_set_serve_endpoints_c(c, endpoints) bind(C, name="mt_set_serve_endpoints") &
        result(status)
      import :: c_ptr, c_int, c_char
      type(c_ptr), value :: c
      character(kind=c_char), intent(in) :: endpoints(*)
      integer(c_int) :: status
    end function
    function mt_set_curve_server_key_c(c, key) bind(C, name="mt_set_curve_server_key") &
        result(status)
      import :: c_ptr, c_int, c_char
      type(c_ptr), value :: c
      character(kind=c_char), intent(in) :: key(*)
      integer(c_int) :: status
    end function
    function c_strlen(s) bind(C, name="strlen") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function
  end interface

contains

  !> A Fortran string as a NUL-terminated C string. Trailing blanks are removed (the
  !> Fortran convention for fixed-length character variables): names cannot end in one.
  pure function c_string(text) result(out)
    character(len=*), intent(in) :: text
    character(kind=c_char, len=:), allocatable :: out
    out = trim(text) // c_null_char
  end function

  !> A copy of the NUL-terminated C string at `p` ('' for a null pointer).
  function f_string(p) result(out)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: out
    character(kind=c_char), pointer :: chars(:)
    integer(c_size_t) :: n, i
    if (.not. c_associated(p)) then
      out = ''
      return
    end if
    n = c_strlen(p)
    call c_f_pointer(p, chars, [n])
    allocate (character(len=n) :: out)
    do i = 1, n
      out(i:i) = chars(i)
    end do
  end function
end module melissa_trainer_c
